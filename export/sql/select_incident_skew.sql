-- select_incident_skew: one row per node that stamped an event of the incident: how far its HLC ran from its wall clock.
--   node: service.instance.id (else service.name).
--   layer: the layers it served in these turns.
--   events: rows of the incident it stamped with an HLC.
--   min_skew_ms: the smallest HLC-minus-wall-clock difference.
--   max_skew_ms: the largest.
--   max_abs_skew_ms: the largest difference either way; compare it with the skew tolerance.
--   tolerance_ms: the skew tolerance (settings.skew_tolerance_ms).
--   note: within tolerance, beyond tolerance, or anomaly (beyond settings.skew_anomaly_ms).
with incident as (select unnest($sessions::varchar[]) as session_id, unnest($turns::varchar[]) as turn_id),

per_node as (
    select
        e.node,
        string_agg(distinct e.layer, ', ' order by e.layer) as layer,
        count(*) as events,
        min(e.skew_ms) as min_skew_ms,
        max(e.skew_ms) as max_skew_ms,
        max(abs(e.skew_ms)) as max_abs_skew_ms
    from turn_events_in(getvariable('turnlens_turn_traces')) as e
    join incident using (session_id, turn_id)
    where e.skew_ms is not null
    group by e.node
)

select
    n.*,
    s.skew_tolerance_ms as tolerance_ms,
    case
        when n.max_abs_skew_ms > s.skew_anomaly_ms then 'anomaly'
        when n.max_abs_skew_ms > s.skew_tolerance_ms then 'beyond tolerance'
        else 'within tolerance'
    end as note
from per_node as n, settings as s
order by n.max_abs_skew_ms desc, n.node
