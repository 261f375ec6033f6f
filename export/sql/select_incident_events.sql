-- select_incident_events: one row per span event of the incident's turns, as stored: the raw appendix, in HLC order.
with incident as (select unnest($sessions::varchar[]) as session_id, unnest($turns::varchar[]) as turn_id)
select
    e.session_id,
    e.turn_id,
    coalesce(e.hlc, e.span_hlc) as hlc,
    e.wall_ns,
    e.layer,
    e.node,
    e.name,
    e.span_name,
    e.trace_id,
    e.span_id,
    e.attributes
from span_events_in(getvariable('turnlens_turn_traces')) as e
join incident using (session_id, turn_id)
order by e.session_id, e.turn_id, coalesce(e.hlc, e.span_hlc), e.wall_ns, e.span_id, e.event_index
