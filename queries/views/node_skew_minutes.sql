-- node_skew_minutes: one row per node and minute: the sums node_skew's events, extremes and mean are read from, added up over turn_node_skew's rows.
-- A store with derived state keeps these sums per partition (a rollup written with each partition's file) and adds
-- up only those and the rows of the partitions deltas still touch (derived/snapshot.sql), not every turn's row.
--   node: the node (service.instance.id, else service.name).
--   service_name: its service.name.
--   minute: the minute (wall clock of the rows).
--   events: rows the node stamped with an HLC in that minute.
--   max_skew_ms: the largest absolute skew.
--   min_skew_ms: the smallest signed skew.
--   sum_skew_ms: the sum of the signed skews.
-- node_skew_minutes_of(rows): the same over a relation with turn_node_skew's columns, named by string (one
-- partition's file, for its rollup).
create or replace macro node_skew_minutes_of(rows) as table
select
    node,
    min(service_name) as service_name,
    minute,
    sum(events)::bigint as events,
    max(list_max(abs_skews)) as max_skew_ms,
    min(min_skew_ms) as min_skew_ms,
    sum(sum_skew_ms) as sum_skew_ms
from query_table(rows)
group by node, minute;

create or replace view node_skew_minutes as
select * from node_skew_minutes_of('turn_node_skew');
