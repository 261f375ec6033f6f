-- budget_breaches: one row per budget a turn, a tool call or a gap between stream segments went over (30 s, 5 s, 200 ms by default; see settings).
--   budget: turn, tool_call or segment_gap.
--   session_id: the session.
--   turn_id: the turn.
--   tool_call_id: the tool call, for a tool_call breach.
--   tool_name: the tool, for a tool_call breach.
--   observed_ms: how long it took (turn: wall clock first to last row seen, open or not; tool_call: its tool spans; segment_gap: HLC time between two stream.progress events).
--   budget_ms: the budget it went over.
--   over_ms: observed_ms minus budget_ms.
--   started_hlc: packed HLC where the breaching stretch started.
--   evidence: one sentence.
create or replace view budget_breaches as
with turn_spans as (
    select session_id, turn_id, (max(wall_ns) - min(wall_ns)) / 1e6 as duration_ms, min(order_hlc) as started_hlc
    from turn_events
    group by session_id, turn_id
),

turn_breaches as (
    select
        'turn' as budget, t.session_id, t.turn_id, null::varchar as tool_call_id, null::varchar as tool_name,
        t.duration_ms as observed_ms, s.turn_budget_ms as budget_ms, t.started_hlc
    from turn_spans as t
    cross join settings as s
    where t.duration_ms > s.turn_budget_ms
),

tool_breaches as (
    select
        'tool_call' as budget, c.session_id, c.turn_id, c.tool_call_id, c.tool_name,
        c.tool_span_ms as observed_ms, s.tool_budget_ms as budget_ms,
        coalesce(c.dispatched_hlc, c.prepared_hlc) as started_hlc
    from side_effects as c
    cross join settings as s
    where c.tool_span_ms > s.tool_budget_ms
),

segments as (
    select
        session_id, turn_id, order_hlc,
        lag(order_hlc) over (partition by turn_id, span_id order by order_hlc, wall_ns) as previous_hlc
    from turn_events
    where step = 'stream.progress'
),

gap_breaches as (
    select
        'segment_gap' as budget, g.session_id, g.turn_id, null::varchar as tool_call_id, null::varchar as tool_name,
        ((g.order_hlc >> 16) - (g.previous_hlc >> 16))::double as observed_ms, s.segment_gap_budget_ms as budget_ms,
        g.previous_hlc as started_hlc
    from segments as g
    cross join settings as s
    where (g.order_hlc >> 16) - (g.previous_hlc >> 16) > s.segment_gap_budget_ms
)

select
    budget,
    session_id,
    turn_id,
    tool_call_id,
    tool_name,
    observed_ms,
    budget_ms,
    observed_ms - budget_ms as over_ms,
    started_hlc,
    format('The {} took {} ms against a budget of {} ms.',
        case budget when 'turn' then 'turn' when 'tool_call' then 'call to ' || coalesce(tool_name, tool_call_id)
            else 'gap between two stream segments' end,
        round(observed_ms, 1), budget_ms) as evidence
from (
    select * from turn_breaches
    union all by name select * from tool_breaches
    union all by name select * from gap_breaches
);
