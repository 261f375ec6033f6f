-- node_skew: one row per node (service.instance.id) and minute: how far the HLCs it stamped ran from its own wall clock, against the tolerance.
-- Skew is the carried HLC's physical part minus the row's wall clock; a node far behind the others shows large skew because the HLC carries their time.
--   node: the node (service.instance.id, else service.name).
--   service_name: its service.name.
--   minute: the minute (wall clock of the rows).
--   events: rows the node stamped with an HLC in that minute.
--   max_skew_ms: the largest absolute skew.
--   p95_skew_ms: the 95th percentile of absolute skew.
--   min_skew_ms: the smallest signed skew (negative: the HLC behind the wall clock, which a correct HLC never is).
--   mean_skew_ms: the mean signed skew (rounded to the nanosecond, so it does not depend on summation order).
--   tolerance_ms: the tolerance (settings.skew_tolerance_ms: 100 ms, 20 ms for one data centre).
--   over_tolerance: max_skew_ms is above the tolerance.
--   anomaly: max_skew_ms is above settings.skew_anomaly_ms (200 ms).
-- The rows are added up from turn_node_skew (one row per turn, node and minute), which a snapshot materialises.
create or replace view node_skew as
with parts as (
    select node, service_name, minute, events, unnest(abs_skews) as abs_skew, min_skew_ms, sum_skew_ms
    from turn_node_skew
),

per_minute as (
    select
        node,
        min(service_name) as service_name,
        minute,
        count(*) as events,
        max(abs_skew) as max_skew_ms,
        quantile_cont(abs_skew, 0.95) as p95_skew_ms,
        min(min_skew_ms) as min_skew_ms
    from parts
    group by node, minute
),

means as (  -- per part first: the unnest repeats each part's sum once per row
    select node, minute, round(sum(sum_skew_ms) / sum(events), 6) as mean_skew_ms
    from turn_node_skew
    group by node, minute
)

select
    p.node,
    p.service_name,
    p.minute,
    p.events,
    p.max_skew_ms,
    p.p95_skew_ms,
    p.min_skew_ms,
    m.mean_skew_ms,
    s.skew_tolerance_ms as tolerance_ms,
    p.max_skew_ms > s.skew_tolerance_ms as over_tolerance,
    p.max_skew_ms > s.skew_anomaly_ms as anomaly
from per_minute as p
join means as m using (node, minute)
cross join settings as s;
