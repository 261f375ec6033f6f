-- One row per unbilled_side_effect finding that became true in the hour before the evaluation (divergences).
-- name: UnbilledSideEffect
-- severity: warning
-- labels: priority=P3
-- for: 0s
-- summary: Turn {turn_id}: billable {tool_call_id} committed and was never charged
-- description: A billable call committed, was not compensated, and no side-effect charge names it.
--     Evidence: {evidence}
-- runbook: Check the billing pipeline for the call; charge it by hand if the product must.
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
where d.kind = 'unbilled_side_effect'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by d.detected_hlc
