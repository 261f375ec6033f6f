-- node_skew_histogram: one row per node, minute and bucket of absolute HLC skew: how many skews fell in it (node_skew reads its p95 off these).
-- Bucket i holds the absolute skews in (1.02^(i-1), 1.02^i] ms, so a bucket is 2 % wide; skews under a nanosecond
-- are bucket -1000. Counts add up: a store with derived state keeps them per partition, as node_skew_minutes.
--   node: the node (service.instance.id, else service.name).
--   minute: the minute (wall clock of the rows).
--   bucket: the bucket of absolute skew (ms), as above.
--   skews: how many of the node's skews in that minute fell in it.
-- node_skew_histogram_of(rows): the same over a relation with turn_node_skew's columns, named by string.
create or replace macro node_skew_histogram_of(rows) as table
select node, minute, bucket, count(*)::bigint as skews
from (
    select node, minute, if(abs_skew < 1e-6, -1000, ceil(ln(abs_skew) / ln(1.02))::integer) as bucket
    from (select node, minute, unnest(abs_skews) as abs_skew from query_table(rows))
)
group by all;

create or replace view node_skew_histogram as
select * from node_skew_histogram_of('turn_node_skew');
