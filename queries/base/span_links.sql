-- span_links: one row per span link, from the linking span to the span it names.
--   trace_id: the linking span's trace.
--   span_id: the linking span.
--   link_index: the link's position in its span (1-based).
--   linked_trace_id: the trace the link names.
--   linked_span_id: the span the link names.
--   trace_state: the W3C tracestate carried by the link.
--   attributes: the link attributes as a JSON object.
--   dropped_attributes_count: attributes the SDK dropped.
--   flags: OTLP link flags.
--   session_id: the linking span's session, resolved as in spans.
--   turn_id: the linking span's turn, resolved as in spans.
create or replace view span_links as
with exploded as (
    select
        trace_id, span_id, session_id, turn_id,
        unnest(links) as link,
        generate_subscripts(links, 1) as link_index
    from spans
    where len(links) > 0
)

select
    trace_id,
    span_id,
    link_index,
    link.trace_id as linked_trace_id,
    link.span_id as linked_span_id,
    link.trace_state as trace_state,
    link.attributes as attributes,
    link.dropped_attributes_count as dropped_attributes_count,
    link.flags as flags,
    session_id,
    turn_id
from exploded;
