-- Every span event of the turn as stored (its span_events rows, trimmed), in HLC order: the raw appendix.
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
semi join turnlens_turn_keys as k on k.session_id = e.session_id and k.turn_id = e.turn_id
order by e.session_id, e.turn_id, coalesce(e.hlc, e.span_hlc), e.wall_ns, e.span_id, e.event_index;
