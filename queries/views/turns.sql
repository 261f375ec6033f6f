-- turns: one row per turn (session_id, turn_id): when it ran, how it ended, what it did, and how many findings it has.
-- A turn whose spans never ended is here with status open, not dropped.
--   session_id: the session (session.id / gen_ai.conversation.id, else inherited, else the trace id).
--   turn_id: the turn (turnlens.turn.id, else inherited, else the trace id).
--   started_wall_ns: the first row of the turn by wall clock, Unix nanoseconds.
--   ended_wall_ns: the last row of the turn by wall clock, Unix nanoseconds; null while a span of the turn never ended.
--   started_at: started_wall_ns as a timestamp.
--   ended_at: ended_wall_ns as a timestamp.
--   started_hlc: the first row's packed HLC (order_hlc).
--   ended_hlc: the last row's packed HLC (order_hlc); null while a span of the turn never ended.
--   last_seen_wall_ns: the last row of the turn by wall clock, ended or not.
--   duration_ms: ended minus started, wall clock, ms; null while a span never ended.
--   status: cancelled (a cancel was requested or the stream finished cancelled), failed (stream error, or an error on an http/stream/runtime or root span), open (a span never ended), else completed.
--   cancel_origin: the first cancel's origin; null when not cancelled.
--   tokens_streamed: the most tokens any stream.progress reported; null when the turn reported none (unknown, not zero).
--   tool_calls: tool calls in the ledger (side_effects).
--   side_effects: committed calls whose tier is above read_only.
--   findings: rows of divergences for the turn.
--   ordering: hlc, or wall_clock when none of the turn's rows carries an HLC.
--   spans: spans in the turn.
--   open_spans: spans that never ended.
--   traces: traces the turn spans (a cancel may arrive in a linked trace).
--   layers: the layers seen, sorted.
--   nodes: the nodes seen, sorted.
-- turns_of(rows, ledger, found, acks): the same rows from relations with the columns of turn_events, side_effects,
-- divergences and cancel_acks, each named by string (those views for the view; a named query passes one turn's).
create or replace macro turns_of(rows, ledger, found, acks) as table
with per_trace as (  -- first per trace, layer and node: the distinct traces, layers and nodes below then come
    -- from a few rows per turn, not every row
    select
        session_id,
        turn_id,
        trace_id,
        layer,
        node,
        min(wall_ns) as started_ns,
        max(wall_ns) as ended_ns,
        min(order_hlc) as started_hlc,
        max(order_hlc) as ended_hlc,
        bool_or(step = 'cancel.requested' or finish_reason = 'cancelled') as cancelled,
        bool_or(
            finish_reason = 'error'
            or (source = 'span_end' and status_code = 'error' and (layer in ('http', 'stream', 'runtime') or parent_span_id is null))
        ) as failed,
        max(stream_tokens) filter (where step = 'stream.progress') as tokens_streamed,
        bool_or(hlc is not null) as has_hlc,
        count(*) filter (where source = 'span_start') as spans,
        count(*) filter (where source = 'span_end') as ended_spans
    from query_table(rows)
    group by session_id, turn_id, trace_id, layer, node
),

per_turn as (
    select
        session_id,
        turn_id,
        min(started_ns) as started_ns,
        max(ended_ns) as ended_ns,
        min(started_hlc) as started_hlc,
        max(ended_hlc) as ended_hlc,
        bool_or(cancelled) as cancelled,
        bool_or(failed) as failed,
        max(tokens_streamed) as tokens_streamed,
        bool_or(has_hlc) as has_hlc,
        sum(spans)::bigint as spans,
        (sum(spans) - sum(ended_spans))::bigint as open_spans,
        count(distinct trace_id) as traces,
        list_sort(list_distinct(list(layer))) as layers,
        list_sort(list_distinct(list(node))) as nodes
    from per_trace
    group by session_id, turn_id
),

calls as (
    select
        session_id, turn_id,
        count(*) as tool_calls,
        count(*) filter (where side_effecting and committed_hlc is not null) as side_effects
    from query_table(ledger)
    group by session_id, turn_id
),

findings as (
    select session_id, turn_id, count(*) as findings
    from query_table(found)
    group by session_id, turn_id
)

select
    t.session_id,
    t.turn_id,
    t.started_ns as started_wall_ns,
    case when t.open_spans = 0 then t.ended_ns end as ended_wall_ns,
    make_timestamp(t.started_ns // 1000) as started_at,
    case when t.open_spans = 0 then make_timestamp(t.ended_ns // 1000) end as ended_at,
    t.started_hlc,
    case when t.open_spans = 0 then t.ended_hlc end as ended_hlc,
    t.ended_ns as last_seen_wall_ns,
    case when t.open_spans = 0 then (t.ended_ns - t.started_ns) / 1e6 end as duration_ms,
    case
        when t.cancelled then 'cancelled'
        when t.failed then 'failed'
        when t.open_spans > 0 then 'open'
        else 'completed'
    end as status,
    x.origin as cancel_origin,
    t.tokens_streamed,
    coalesce(c.tool_calls, 0) as tool_calls,
    coalesce(c.side_effects, 0) as side_effects,
    coalesce(f.findings, 0) as findings,
    case when t.has_hlc then 'hlc' else 'wall_clock' end as ordering,
    t.spans,
    t.open_spans,
    t.traces,
    t.layers,
    t.nodes
from per_turn as t
left join query_table(acks) as x using (session_id, turn_id)
left join calls as c using (session_id, turn_id)
left join findings as f using (session_id, turn_id);

-- The view derives turn_events once and computes the ledger, the cancels and the findings from those rows, as the
-- derived state does (derived/fresh.sql): naming the four views instead would derive the events four times over, and
-- plan each of them again (seconds on the sample, most of it in the optimiser).
create or replace view turns as
with events as materialized (
    select * from turn_events
),

ledger as materialized (
    select * from side_effects_of('events')
),

acks as materialized (
    select * from cancel_acks_of('events')
),

found as (
    select session_id, turn_id from divergences_from('events', 'ledger', 'acks')
)

select * from turns_of('events', 'ledger', 'found', 'acks');
