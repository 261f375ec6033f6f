-- One row per billed_not_committed finding that became true in the hour before the evaluation (divergences).
-- name: BilledNotCommitted
-- severity: warning
-- labels: priority=P3
-- for: 0s
-- summary: Turn {turn_id}: a charge names {tool_call_id}, which never committed
-- description: The user was charged for a side effect that did not happen.
--     Evidence: {evidence}
-- runbook: Refund the charge; charge only after tool.committed (or compensate the charge with the call).
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
where d.kind = 'billed_not_committed'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by d.detected_hlc
