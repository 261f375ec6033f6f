-- overview_partial_store: the partial-store hit rate over the whole store (partial.stored per tool call).
select * from partial_store_rate;
