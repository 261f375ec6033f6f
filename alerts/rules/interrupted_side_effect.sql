-- One alert per tool with interrupted_side_effect findings that became true in the hour before the evaluation, with their count and the worst three (divergences).
-- name: InterruptedSideEffect
-- severity: warning
-- labels: priority=P2
-- for: 0s
-- group_by: kind, tool_name
-- summary: {count} {tool_name} call(s) cut short by a stop without a result: their side effect is unknown (worst: turn {turn_id})
-- example: Turn {turn_id}: {tool_call_id} was running when the user stopped and ended without a result
-- description: A side-effecting call was still running when its turn was cancelled and its span ended by the cancel: the agent framework stopped waiting for it, but the tool may have gone on and acted. The spans cannot say whether the world changed.
--     The worst: {evidence}
-- runbook: 1. Ask the third party whether the call took effect (by idempotency key where the call has one), and tell the user what happened.
--     2. Make the tool report its outcome after a stop: let it finish and record the commit or failure, or run it as a speculative call that a stop discards before it is sent.
--     Export the worst turn for the review: `turnlens export --store DIR --session {session_id} --turn {turn_id} --format html --out incident.html`.
--     Resolves by itself an hour after the finding (the finding stays in divergences).
select
    d.kind,
    d.session_id,
    d.turn_id,
    d.tool_call_id,
    d.idempotency_key,
    coalesce(s.tool_name, 'unknown') as tool_name,
    d.severity as finding_severity,
    d.evidence as annotation_evidence
from divergences as d
left join side_effects as s using (session_id, turn_id, tool_call_id)
where d.kind = 'interrupted_side_effect'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by case d.severity when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end, d.detected_hlc desc  -- the worst first: the examples
