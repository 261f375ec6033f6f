-- Per node that stamped an event of the turn: how far its HLC ran from its wall clock, the largest first.
-- The words of node_skew: skew is the carried HLC's physical part minus the row's wall clock.
--   node: service.instance.id (else service.name).
--   layer: the layers it served in the turn.
--   events: rows of the turn it stamped with an HLC.
--   max_skew_ms: the largest absolute skew; compare it with the skew tolerance.
--   p95_skew_ms: the 95th percentile of absolute skew.
--   min_skew_ms: the smallest signed skew (negative: the HLC behind the wall clock).
--   tolerance_ms: the skew tolerance (settings.skew_tolerance_ms).
--   note: within tolerance, beyond tolerance, or anomaly (beyond settings.skew_anomaly_ms).
with per_node as (
    select
        e.node,
        string_agg(distinct e.layer, ', ' order by e.layer) as layer,
        count(*) as events,
        max(abs(e.skew_ms)) as max_skew_ms,
        quantile_cont(abs(e.skew_ms), 0.95) as p95_skew_ms,
        min(e.skew_ms) as min_skew_ms
    from turnlens_turn_rows as e
    semi join turnlens_turn_keys as k on k.session_id = e.session_id and k.turn_id = e.turn_id
    where e.skew_ms is not null
    group by e.node
)

select
    n.*,
    s.skew_tolerance_ms as tolerance_ms,
    case
        when n.max_skew_ms > s.skew_anomaly_ms then 'anomaly'
        when n.max_skew_ms > s.skew_tolerance_ms then 'beyond tolerance'
        else 'within tolerance'
    end as note
from per_node as n, settings as s
order by n.max_skew_ms desc, n.node;
