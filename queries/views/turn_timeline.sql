-- turn_timeline: one row per event of a turn (span starts and ends, span events, inferred cancels; not the events frameworks log that are no step) in causal order, numbered, with the wall-clock order beside it.
-- Causal order is the HLC (order_hlc); a turn with no HLC at all is ordered by wall clock and says so in `ordering`.
-- Ties (two events in the same millisecond and logical tick) fall back to wall clock, then to span and event position.
--   session_id: the session.
--   turn_id: the turn.
--   seq: position in the turn's causal order, from 1.
--   wall_seq: position in the turn's wall-clock order, from 1; where it differs from seq the wall clocks tell another story.
--   ordering: hlc, or wall_clock when none of the turn's rows carries an HLC.
--   offset_ms: ms since the turn's first event, on the HLC's physical part.
--   source: span_start, span_end, event, or inferred (a cancel inferred from a framework's spans).
--   name: the event name, or the span name for span starts and ends.
--   step: the contract step (cancel.requested, tool.committed, ...), null for plain span starts and ends.
--   layer: the layer that logged it.
--   node: whose clock stamped it.
--   service_name: service.name of the emitting resource.
--   trace_id: the trace it came from (a cancel may come in a linked trace).
--   span_id: the span it came from.
--   span_name: the span's name.
--   wall_ns: wall-clock time, Unix nanoseconds.
--   wall_at: the same as a timestamp.
--   hlc: the HLC the row carries itself; null when none.
--   hlc_source: hlc, span_clock (derived from its span's HLC) or wall_clock.
--   order_hlc: the packed HLC the order follows.
--   hlc_ms: the physical part of order_hlc, Unix ms.
--   hlc_logical: the logical counter of order_hlc.
--   skew_ms: the carried HLC's physical part minus the row's wall clock, ms.
--   tool_call_id: the tool call the row names.
--   tool_name: the tool.
--   idempotency_key: the call's idempotency key.
--   cancel_origin: the cancel origin, on cancel rows.
--   finish_reason: the stream's finish reason, on stream.completed.
--   stream_tokens: tokens sent so far, on stream.progress.
--   third_party_status: the third party's status, on third_party.ack.
--   attributes: the row's own attributes as JSON.
-- turn_timeline_from(events): the same rows from the rows of a turn_events-shaped relation, given by name (the
-- one-turn queries pass the turn_events rows they hold, queries/turn/hold_read.sql).
create or replace macro turn_timeline_from(events) as table
with rows_of_turn as (
    select
        *,
        bool_or(hlc is not null) over (partition by turn_id) as turn_has_hlc
    from query_table(events)
    -- the events a framework logs that are no step (exception, stream chunks, GenAI content events: turn_events
    -- gives them no step) are noise on a timeline; a cancellation among them shows as its inferred cancel row
    where not (source = 'event' and step is null)
),

numbered as (
    select
        *,
        row_number() over (
            partition by turn_id
            order by
                case when turn_has_hlc then order_hlc else wall_ns end,
                wall_ns, source = 'span_end', trace_id, span_id, event_index
        ) as seq,
        row_number() over (
            partition by turn_id
            order by wall_ns, order_hlc, source = 'span_end', trace_id, span_id, event_index
        ) as wall_seq,
        min(order_hlc >> 16) over (partition by turn_id) as first_ms
    from rows_of_turn
)

select
    session_id,
    turn_id,
    seq,
    wall_seq,
    case when turn_has_hlc then 'hlc' else 'wall_clock' end as ordering,
    (order_hlc >> 16) - first_ms as offset_ms,
    source,
    name,
    step,
    layer,
    node,
    service_name,
    trace_id,
    span_id,
    span_name,
    wall_ns,
    make_timestamp(wall_ns // 1000) as wall_at,
    hlc,
    hlc_source,
    order_hlc,
    hlc_ms,
    order_hlc & 65535 as hlc_logical,
    skew_ms,
    tool_call_id,
    tool_name,
    idempotency_key,
    cancel_origin,
    finish_reason,
    stream_tokens,
    third_party_status,
    attributes
from numbered;

-- turn_timeline_in(traces): the same rows for the traces of a list only (null: every trace); see spans_in.
create or replace macro turn_timeline_in(traces) as table
with listed_events as (select * from turn_events_in(traces))
select * from turn_timeline_from('listed_events');

create or replace view turn_timeline as
select * from turn_timeline_in(null);
