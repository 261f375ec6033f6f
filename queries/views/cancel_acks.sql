-- cancel_acks: one row per cancelled turn (a turn with cancel.requested): from the first request to the last acknowledgement, overall and per layer.
-- Latencies are on the HLC's physical component (wall clock for turns without HLC: see ordering).
--   session_id: the session.
--   turn_id: the turn.
--   origin: turnlens.cancel.origin of the first request (user_clicked / user_typed / timeout / client_disconnect); for
--     a cancel inferred from a framework's spans, how it was inferred (inferred.exception, inferred.no_finish_reason,
--     inferred.error_finish_reason, inferred.span_never_ended, inferred.tool_without_result: see
--     inferred_steps_from).
--   requested_layer: the layer where the cancel entered.
--   requested_hlc: packed HLC of the first cancel.requested.
--   requested_at: the same instant as a timestamp (HLC physical part).
--   acked_hlc: packed HLC of the last cancel.acknowledged; null when no layer acknowledged.
--   cancel_to_ack_ms: acked minus requested, in ms; null when no layer acknowledged (for an inferred cancel: when the
--     spans do not show when it was acknowledged, i.e. unknown).
--   http_ack_ms: the http layer's last acknowledgement after the request, in ms; null when it never acknowledged.
--   stream_ack_ms: the same for the stream layer.
--   runtime_ack_ms: the same for the agent runtime.
--   tool_ack_ms: the same for the tool layer.
--   layers_reached: layers that saw the cancel (requested, received or acknowledged), sorted.
--   layers_acked: layers that acknowledged it, sorted.
--   ordering: hlc when the cancel events carry HLC, else wall_clock.
-- cancel_acks_of(rows): the same over any relation with turn_events' columns, named by string
-- (divergences passes the turn_events it has already computed).
create or replace macro cancel_acks_of(rows) as table
with cancel_rows as (
    select session_id, turn_id, step, layer, order_hlc, cancel_origin, hlc_source
    from query_table(rows)
    where step in ('cancel.requested', 'cancel.received', 'cancel.acknowledged')
),

per_turn as (
    select
        session_id,
        turn_id,
        min(order_hlc) filter (where step = 'cancel.requested') as requested_hlc,
        arg_min(cancel_origin, row(order_hlc, cancel_origin)) filter (where step = 'cancel.requested') as requested_origin,
        min(cancel_origin) as any_origin,
        arg_min(layer, row(order_hlc, layer)) filter (where step = 'cancel.requested') as requested_layer,
        max(order_hlc) filter (where step = 'cancel.acknowledged') as acked_hlc,
        max(order_hlc) filter (where step = 'cancel.acknowledged' and layer = 'http') as http_acked_hlc,
        max(order_hlc) filter (where step = 'cancel.acknowledged' and layer = 'stream') as stream_acked_hlc,
        max(order_hlc) filter (where step = 'cancel.acknowledged' and layer = 'runtime') as runtime_acked_hlc,
        max(order_hlc) filter (where step = 'cancel.acknowledged' and layer = 'tool') as tool_acked_hlc,
        list_sort(list_distinct(list(layer))) as layers_reached,
        list_sort(list_distinct(list(layer) filter (where step = 'cancel.acknowledged'))) as layers_acked,
        bool_or(hlc_source = 'hlc') as has_hlc
    from cancel_rows
    group by session_id, turn_id
)

select
    session_id,
    turn_id,
    coalesce(requested_origin, any_origin) as origin,
    requested_layer,
    requested_hlc,
    epoch_ms(requested_hlc >> 16) as requested_at,
    acked_hlc,
    (acked_hlc >> 16) - (requested_hlc >> 16) as cancel_to_ack_ms,
    (http_acked_hlc >> 16) - (requested_hlc >> 16) as http_ack_ms,
    (stream_acked_hlc >> 16) - (requested_hlc >> 16) as stream_ack_ms,
    (runtime_acked_hlc >> 16) - (requested_hlc >> 16) as runtime_ack_ms,
    (tool_acked_hlc >> 16) - (requested_hlc >> 16) as tool_ack_ms,
    coalesce(layers_reached, []) as layers_reached,
    coalesce(layers_acked, []) as layers_acked,
    case when has_hlc then 'hlc' else 'wall_clock' end as ordering
from per_turn
where requested_hlc is not null;

-- The view itself reads a narrow path instead of turn_events: only the cancel steps are unnested, and only their
-- turnlens.cancel.origin is parsed (turn_events parses 18 attributes of every event). The columns are derived as
-- turn_events derives them (order_hlc, hlc_source, an event's origin else its span's). The spans are resolved once,
-- into the columns the cancel steps and the inferred cancels read (framework_input_of's, plus the cancel steps):
-- naming `spans` twice would resolve every trace twice and plan the resolution twice.
create or replace view cancel_acks as
with resolved as materialized (
    select
        * exclude (all_attributes, all_events, status_message),
        case when hlc is null or len(steps) > 0 then all_attributes end as attributes,
        case when hlc is null then status_message end as status_message,
        case when hlc is null then list_filter(all_events, lambda e: e.name = 'exception') else [] end as events
    from (
        select
            session_id, turn_id, trace_id, span_id, parent_span_id, name, kind, status_code, status_message, layer,
            node, service_name, start_time_unix_nano, end_time_unix_nano, hlc,
            attributes as all_attributes,
            events as all_events,
            list_concat(
                case when name in ('cancel.requested', 'cancel.received', 'cancel.acknowledged') then  -- a step as a span
                    [struct_pack(step := name, wall_ns := start_time_unix_nano, own_hlc := hlc, attributes := null::varchar)]
                else [] end,
                list_transform(
                    list_filter(events, lambda e: e.name in ('cancel.requested', 'cancel.received', 'cancel.acknowledged')),
                    lambda e: struct_pack(step := e.name, wall_ns := e.time_unix_nano, own_hlc := e.hlc, attributes := e.attributes)
                )
            ) as steps
        from spans
    )
),

cancel_spans as (
    select session_id, turn_id, layer, turnlens_hlc(hlc) as span_hlc, start_time_unix_nano, attributes, steps
    from resolved
),

cancel_steps as (
    select * exclude (steps), unnest(steps) as r
    from cancel_spans
    where len(steps) > 0
),

cancel_rows as (
    select
        session_id,
        turn_id,
        r.step as step,
        layer,
        coalesce(
            turnlens_hlc(r.own_hlc),
            span_clock_hlc(span_hlc, r.wall_ns, start_time_unix_nano),
            (r.wall_ns // 1000000) << 16
        ) as order_hlc,
        coalesce(
            json_extract_string(r.attributes, '$."turnlens.cancel.origin"'),
            json_extract_string(attributes, '$."turnlens.cancel.origin"')
        ) as cancel_origin,
        case when turnlens_hlc(r.own_hlc) is not null then 'hlc' when span_hlc is not null then 'span_clock' else 'wall_clock' end
            as hlc_source
    from cancel_steps
    union all  -- the cancels a framework's spans show without declaring them (turn_events.sql)
    select session_id, turn_id, step, layer, order_hlc, cancel_origin, hlc_source
    from inferred_steps_from('resolved')
)

select * from cancel_acks_of('cancel_rows');
