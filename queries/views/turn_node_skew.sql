-- turn_node_skew: one row per turn, node and minute: the HLC skews the node stamped on the turn's rows in that minute, the parts node_skew adds up (materialised per turn with the snapshot, so node_skew reads these instead of every event).
--   session_id: the session.
--   turn_id: the turn.
--   node: the node (service.instance.id, else service.name).
--   service_name: its service.name.
--   minute: the minute (wall clock of the rows).
--   events: rows of the turn the node stamped with an HLC in that minute.
--   abs_skews: the absolute skew of each of those rows, ms (the p95 across turns needs every value).
--   min_skew_ms: the smallest signed skew.
--   sum_skew_ms: the sum of the signed skews (node_skew's mean is the sum over the count).
-- turn_node_skew_of(rows): the same over a relation with turn_events' columns, named by string.
create or replace macro turn_node_skew_of(rows) as table
select
    session_id,
    turn_id,
    node,
    min(service_name) as service_name,
    time_bucket(interval 1 minute, make_timestamp(wall_ns // 1000)) as minute,
    count(*) as events,
    list(abs(skew_ms) order by abs(skew_ms)) as abs_skews,
    min(skew_ms) as min_skew_ms,
    sum(skew_ms) as sum_skew_ms
from query_table(rows)
where hlc is not null
group by session_id, turn_id, node, minute;

create or replace view turn_node_skew as
select * from turn_node_skew_of('turn_events');
