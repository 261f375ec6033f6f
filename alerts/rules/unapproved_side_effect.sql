-- One row per unapproved_side_effect finding that became true in the hour before the evaluation (divergences).
-- name: UnapprovedSideEffect
-- severity: warning
-- labels: priority=P2
-- for: 0s
-- summary: Turn {turn_id}: {tool_call_id} committed without approval
-- description: A call that requires approval committed without an approval.granted before it.
--     Evidence: {evidence}
-- runbook: 1. Check the approval gate of the runtime for this tool.
--     2. Confirm the action with the user after the fact.
--     Export the turn for the review: `turnlens export --store DIR --session {session_id} --turn {turn_id} --format html --out incident.html`.
--     Resolves by itself an hour after the finding (the finding stays in divergences).
select
    d.kind,
    d.session_id,
    d.turn_id,
    d.tool_call_id,
    d.idempotency_key,
    d.severity as finding_severity,
    d.evidence as annotation_evidence
from divergences as d
where d.kind = 'unapproved_side_effect'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by d.detected_hlc
