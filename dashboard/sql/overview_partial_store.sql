-- overview_partial_store: the partial-store hit rate (partial.stored per tool call) over the days in [$from_ms, $to_ms], against its target.
select
    sum(partial_stored) as partial_stored,
    sum(tool_calls) as tool_calls,
    sum(partial_stored) / nullif(sum(tool_calls), 0) as hit_rate,
    max(target) as target
from partial_store_rate
where tool_name is null
  and ($from_ms is null or day >= make_timestamp($from_ms * 1000)::date)
  and ($to_ms is null or day <= make_timestamp($to_ms * 1000)::date);
