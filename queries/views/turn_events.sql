-- turn_events: one row per thing that happened in a turn: each span's start and end, and each span event, with the contract's attributes typed.
-- A lifecycle step emitted as its own span (named like the event, e.g. `tool.committed`) is a step at its start.
--   session_id: the session, resolved as in spans.
--   turn_id: the turn, resolved as in spans.
--   trace_id: the trace of the span the row comes from.
--   span_id: the span the row comes from.
--   parent_span_id: that span's parent.
--   source: span_start, span_end or event.
--   event_index: the event's position in its span (1-based); 0 for a span start, null for a span end.
--   name: the event name, or the span name for span starts and ends.
--   step: the contract step this row is (cancel.requested, tool.committed, ...); null for plain span starts and ends.
--   layer: the span's layer (http, stream, runtime, tool, third_party, billing); null when nothing tells.
--   node: service.instance.id (else service.name): whose clock stamped the row.
--   service_name: service.name of the emitting resource.
--   span_name: the span's name.
--   span_kind: the span's OTLP kind.
--   status_code: the span's status (unset / ok / error).
--   wall_ns: when it happened by the emitting node's wall clock, Unix nanoseconds.
--   hlc: the HLC the row carries itself (the event's turnlens.hlc, or the span's for its start); null when none.
--   hlc_source: hlc (carried), span_clock (span's HLC plus wall time elapsed in the span) or wall_clock (no HLC at all).
--   order_hlc: the packed HLC the timelines sort on: hlc, else derived as hlc_source says.
--   hlc_ms: the physical part of order_hlc, Unix milliseconds.
--   skew_ms: the carried HLC's physical part minus the row's own wall clock, in ms; null without a carried HLC.
--   tool_call_id: gen_ai.tool.call.id (of the event, else of its span; a framework tool span without one is named by its span_id).
--   tool_name: gen_ai.tool.name, else OpenInference tool.name.
--   idempotency_key: turnlens.idempotency_key.
--   tier: turnlens.tool.tier as the span says it (the registry fills gaps later, in side_effects).
--   dispatch: turnlens.tool.dispatch (eager / speculative).
--   billable: turnlens.tool.billable.
--   requires_approval: turnlens.tool.requires_approval.
--   cancel_origin: turnlens.cancel.origin (user_clicked / user_typed / timeout / client_disconnect).
--   finish_reason: the first of gen_ai.response.finish_reasons (stop / cancelled / error).
--   stream_tokens: turnlens.stream.tokens, tokens sent so far.
--   third_party_status: turnlens.third_party.status (e.g. 250 OK).
--   replayed: turnlens.third_party.replayed: the idempotency key de-duplicated this acknowledgement.
--   billing_kind: turnlens.billing.kind (tokens / side_effect).
--   billing_amount: turnlens.billing.amount.
--   billing_tokens: turnlens.billing.tokens.
--   input_kind: turnlens.input.kind (message / typing).
--   attributes: the row's own attributes as JSON (the event's, or the span's for starts and ends).
-- turn_events_from(spans): the same rows over a relation with the spans view's columns, named by string
-- (turn_events_in passes a list's traces; the materialised views' fresh part passes its own, derived/fresh.sql).
create or replace macro turn_events_from(spans) as table
with contract_steps(step) as (  -- the span contract's event names (kernel/contract.py EVENT_NAMES)
    values
        ('turn.user_input'), ('stream.progress'), ('stream.completed'), ('cancel.requested'),
        ('cancel.received'), ('cancel.acknowledged'), ('tool.buffered'), ('tool.dispatched'),
        ('tool.prepared'), ('tool.committed'), ('tool.compensated'), ('tool.compensation_failed'),
        ('tool.discarded'), ('tool.failed'), ('partial.stored'), ('third_party.ack'),
        ('approval.requested'), ('approval.granted'), ('approval.denied'), ('billing.charged'),
        ('transcript.receipt')
),

typed_spans as (  -- what a span's events inherit from it (tool identity), as scalar columns: a list of 18 copied
    -- onto each of its rows by the unnest cost more than parsing the attributes of the span's start and end again
    select
        * exclude (inherited),
        inherited[1] as inherited_call_id,
        inherited[2] as inherited_tool_name,
        inherited[3] as inherited_oi_tool_name,
        inherited[4] as inherited_idempotency_key,
        inherited[5] as inherited_tier,
        inherited[6] as inherited_dispatch,
        inherited[7] as inherited_billable,
        inherited[8] as inherited_requires_approval,
        inherited[9] as inherited_cancel_origin
    from (
        select
            session_id, turn_id, trace_id, span_id, parent_span_id, name as span_name, kind as span_kind,
            status_code, layer, node, service_name, hlc as span_hlc, start_time_unix_nano, end_time_unix_nano,
            attributes as span_attributes,
            list_concat(  -- every row the span gives, unnested once below (no CTE read three times, none materialised)
                [struct_pack(source := 'span_start', event_index := 0::bigint, name := name,
                    wall_ns := start_time_unix_nano, own_hlc := hlc, attributes := null::varchar)],
                case when end_time_unix_nano is not null then  -- a span that never ended has no end row (turn is open)
                    [struct_pack(source := 'span_end', event_index := null::bigint, name := name,
                        wall_ns := end_time_unix_nano, own_hlc := null::bigint, attributes := null::varchar)]
                else [] end,
                list_transform(events, lambda event, i: struct_pack(source := 'event', event_index := i::bigint,
                    name := event.name, wall_ns := event.time_unix_nano, own_hlc := event.hlc,
                    attributes := event.attributes))
            ) as span_rows,
            json_extract_string(attributes, [
                '$."gen_ai.tool.call.id"', '$."gen_ai.tool.name"', '$."tool.name"', '$."turnlens.idempotency_key"',
                '$."turnlens.tool.tier"', '$."turnlens.tool.dispatch"', '$."turnlens.tool.billable"',
                '$."turnlens.tool.requires_approval"', '$."turnlens.cancel.origin"'
            ]) as inherited
        from query_table(spans)
    )
),

exploded as (
    select s.* exclude (span_rows), unnest(s.span_rows) as r
    from typed_spans as s
),

all_rows as (  -- each row's own attributes parsed once: the event's, or the span's for its start and end
    select
        * exclude (r, span_attributes, own_attributes),
        json_extract_string(own_attributes, [
            '$."gen_ai.tool.call.id"', '$."gen_ai.tool.name"', '$."tool.name"', '$."turnlens.idempotency_key"',
            '$."turnlens.tool.tier"', '$."turnlens.tool.dispatch"', '$."turnlens.tool.billable"',
            '$."turnlens.tool.requires_approval"', '$."turnlens.cancel.origin"',
            '$."gen_ai.response.finish_reasons"[0]', '$."gen_ai.response.finish_reasons"',
            '$."turnlens.stream.tokens"', '$."turnlens.third_party.status"', '$."turnlens.third_party.replayed"',
            '$."turnlens.billing.kind"', '$."turnlens.billing.amount"', '$."turnlens.billing.tokens"',
            '$."turnlens.input.kind"'
        ]) as own,
        own_attributes as attributes
    from (
        select
            *,
            r.source as source,
            r.event_index as event_index,
            r.name as name,
            case
                when r.source = 'event' then r.name
                -- a lifecycle step emitted as its own span (the contract's event names, kernel/contract.py)
                when r.source = 'span_start' and r.name in (select step from contract_steps) then r.name
            end as step,
            r.wall_ns as wall_ns,
            r.own_hlc as own_hlc,
            case when r.source = 'event' then r.attributes else span_attributes end as own_attributes
        from exploded
    )
),

clocked as (  -- the order key: the carried HLC, else the span's HLC moved on by wall time, else wall time
    select
        *,
        case
            when own_hlc is not null then 'hlc'
            when span_hlc is not null then 'span_clock'
            else 'wall_clock'
        end as hlc_source,
        coalesce(
            own_hlc,
            ((span_hlc >> 16) + (wall_ns - start_time_unix_nano) // 1000000) << 16,
            (wall_ns // 1000000) << 16
        ) as order_hlc,
        coalesce(own[1], inherited_call_id) as named_call_id,
        coalesce(own[2], own[3], inherited_tool_name, inherited_oi_tool_name) as any_tool_name
    from all_rows
)

select
    session_id,
    turn_id,
    trace_id,
    span_id,
    parent_span_id,
    source,
    event_index,
    name,
    step,
    layer,
    node,
    service_name,
    span_name,
    span_kind,
    status_code,
    wall_ns,
    own_hlc as hlc,
    hlc_source,
    order_hlc,
    order_hlc >> 16 as hlc_ms,
    ((own_hlc >> 16) * 1000000 - wall_ns) / 1e6 as skew_ms,
    coalesce(named_call_id, case when layer = 'tool' and any_tool_name is not null then span_id end)
        as tool_call_id,
    any_tool_name as tool_name,
    coalesce(own[4], inherited_idempotency_key) as idempotency_key,
    coalesce(own[5], inherited_tier) as tier,
    coalesce(own[6], inherited_dispatch) as dispatch,
    try_cast(coalesce(own[7], inherited_billable) as boolean) as billable,
    try_cast(coalesce(own[8], inherited_requires_approval) as boolean) as requires_approval,
    coalesce(own[9], inherited_cancel_origin) as cancel_origin,
    coalesce(own[10], own[11]) as finish_reason,
    try_cast(own[12] as bigint) as stream_tokens,
    own[13] as third_party_status,
    try_cast(own[14] as boolean) as replayed,
    own[15] as billing_kind,
    try_cast(own[16] as double) as billing_amount,
    try_cast(own[17] as bigint) as billing_tokens,
    own[18] as input_kind,
    attributes
from clocked;

-- turn_events_in(traces): the same rows for the traces of a list only (null: every trace); see spans_in.
create or replace macro turn_events_in(traces) as table
with resolved_spans as (select * from spans_in(traces))
select * from turn_events_from('resolved_spans');

create or replace view turn_events as
select * from turn_events_in(null);
