-- span_events: one row per span event, with the identity of the span that carries it.
--   trace_id: the span's trace.
--   span_id: the span that carries the event.
--   event_index: the event's position in its span (1-based).
--   name: the event name (the contract's names: cancel.requested, tool.committed, ...).
--   time_unix_nano: when the event happened, Unix nanoseconds, by the emitting node's wall clock.
--   attributes: the event attributes as a JSON object.
--   dropped_attributes_count: attributes the SDK dropped.
--   hlc: the event's own turnlens.hlc; null when it carries none.
--   span_hlc: the carrying span's turnlens.hlc at its start.
--   span_name: the carrying span's name.
--   span_attributes: the carrying span's attributes (tool calls name themselves on the span).
--   session_id: the session, resolved as in spans.
--   turn_id: the turn, resolved as in spans.
--   layer: the carrying span's layer.
--   node: the node whose clock stamped the event.
--   service_name: service.name of the emitting resource.
--   wall_ns: time_unix_nano, named for what the timelines sort on when there is no HLC.
-- span_events_in(traces): the same rows for the traces of a list only (null: every trace); see spans_in.
create or replace macro span_events_in(traces) as table
with exploded as (
    select
        trace_id, span_id, name as span_name, attributes as span_attributes, hlc as span_hlc,
        session_id, turn_id, layer, node, service_name,
        unnest(events) as event,
        generate_subscripts(events, 1) as event_index
    from spans_in(traces)
    where len(events) > 0
)

select
    trace_id,
    span_id,
    event_index,
    event.name as name,
    event.time_unix_nano as time_unix_nano,
    event.attributes as attributes,
    event.dropped_attributes_count as dropped_attributes_count,
    event.hlc as hlc,
    span_hlc,
    span_name,
    span_attributes,
    session_id,
    turn_id,
    layer,
    node,
    service_name,
    event.time_unix_nano as wall_ns
from exploded;

create or replace view span_events as
select * from span_events_in(null);
