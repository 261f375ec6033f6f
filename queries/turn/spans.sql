-- Every span of the turn with its parent and its events, by start time: the waterfall and its detail panel.
select
    s.span_id,
    s.parent_span_id,
    s.trace_id,
    s.name,
    s.kind,
    s.layer,
    s.node,
    s.service_name,
    s.status_code,
    s.status_message,
    s.start_time_unix_nano,
    s.end_time_unix_nano,
    s.duration_ms,
    s.hlc,
    s.attributes,
    s.resource_attributes,
    [
        {'name': e.name, 'time_unix_nano': e.time_unix_nano, 'hlc': e.hlc, 'attributes': e.attributes}
        for e in s.events
    ] as events
from turnlens_turn_spans as s
semi join turnlens_turn_keys as k on k.session_id = s.session_id and k.turn_id = s.turn_id
order by s.session_id, s.turn_id, s.start_time_unix_nano, s.span_id;
