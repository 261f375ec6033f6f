-- node_skew: one row per node (service.instance.id) and minute: how far the HLCs it stamped ran from its own wall clock, against the tolerance.
-- Skew is the carried HLC's physical part minus the row's wall clock; a node far behind the others shows large skew because the HLC carries their time.
--   node: the node (service.instance.id, else service.name).
--   service_name: its service.name.
--   minute: the minute (wall clock of the rows).
--   events: rows the node stamped with an HLC in that minute.
--   max_skew_ms: the largest absolute skew.
--   p95_skew_ms: the 95th percentile of absolute skew.
--   min_skew_ms: the smallest signed skew (negative: the HLC behind the wall clock, which a correct HLC never is).
--   mean_skew_ms: the mean signed skew.
--   tolerance_ms: the tolerance (settings.skew_tolerance_ms: 100 ms, 20 ms for one data centre).
--   over_tolerance: max_skew_ms is above the tolerance.
--   anomaly: max_skew_ms is above settings.skew_anomaly_ms (200 ms).
create or replace view node_skew as
with stamped as (
    select node, service_name, time_bucket(interval 1 minute, make_timestamp(wall_ns // 1000)) as minute, skew_ms
    from turn_events
    where hlc is not null
),

per_minute as (
    select
        node,
        min(service_name) as service_name,
        minute,
        count(*) as events,
        max(abs(skew_ms)) as max_skew_ms,
        quantile_cont(abs(skew_ms), 0.95) as p95_skew_ms,
        min(skew_ms) as min_skew_ms,
        avg(skew_ms) as mean_skew_ms
    from stamped
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
    p.mean_skew_ms,
    s.skew_tolerance_ms as tolerance_ms,
    p.max_skew_ms > s.skew_tolerance_ms as over_tolerance,
    p.max_skew_ms > s.skew_anomaly_ms as anomaly
from per_minute as p
cross join settings as s;
