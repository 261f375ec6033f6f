-- turn_spans: every span of one turn ($session, $turn) with its parent, for the waterfall and its detail panel.
-- Reads the spans turn_hold holds (run it first on the same cursor, as data.turn_query does).
select
    span_id,
    parent_span_id,
    trace_id,
    name,
    kind,
    layer,
    node,
    service_name,
    status_code,
    status_message,
    start_time_unix_nano,
    end_time_unix_nano,
    duration_ms,
    hlc,
    attributes,
    resource_attributes,
    [
        {'name': e.name, 'time_unix_nano': e.time_unix_nano, 'hlc': e.hlc, 'attributes': e.attributes}
        for e in events
    ] as events
from turnlens_turn_spans
where session_id = $session and turn_id = $turn
order by start_time_unix_nano, span_id;
