-- One row per budget (and tool) that turns or tool calls went over in the last 15 minutes (budget_breaches).
-- name: BudgetBreached
-- severity: warning
-- labels: priority=P3
-- for: 0s
-- summary: {value} {budget} budget breaches{tool_text} in the last 15 minutes (worst {worst_ms} ms over a {budget_ms} ms budget)
-- description: Over the last 15 minutes {value} times a {budget} went over its budget of {budget_ms} ms
--     (turn 30 s, tool call 5 s, gap between stream segments 200 ms by default). Worst: turn {worst_turn}
--     of session {worst_session}. {worst_evidence}
-- runbook: 1. `turnlens query --store DIR "select * from budget_breaches where budget = '{budget}' order by started_hlc desc"`.
--     2. turn: long tool chains or a stalled stream; tool_call: the tool's dependency is slow (add a timeout
--        that honours the AbortSignal); segment_gap: the model or the stream layer stalls between tokens.
--     3. Budgets are settings (turn_budget_ms, tool_budget_ms, segment_gap_budget_ms).
select
    budget,
    tool_name,
    count(*) as value,
    case when tool_name is null then '' else ' of ' || tool_name end as annotation_tool_text,
    max(budget_ms) as annotation_budget_ms,
    max(observed_ms) as annotation_worst_ms,
    arg_max(turn_id, observed_ms) as annotation_worst_turn,
    arg_max(session_id, observed_ms) as annotation_worst_session,
    arg_max(evidence, observed_ms) as annotation_worst_evidence
from budget_breaches
where started_hlc <= $at_hlc
  and started_hlc > $at_hlc - (15 * 60 * 1000::bigint << 16)
group by budget, tool_name
order by budget, tool_name
