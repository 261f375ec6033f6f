-- One row per cancel_not_propagated finding that became true in the hour before the evaluation (divergences).
-- name: CancelNotPropagated
-- severity: warning
-- labels: priority=P2
-- for: 0s
-- summary: Turn {turn_id}: the cancel did not reach every layer
-- description: A cancel reached some layers but not the runtime, or not the tool layer while a tool call ran, or no layer acknowledged it.
--     Evidence: {evidence}
-- runbook: 1. Look at the turn's verdict matrix: which layer never saw cancel.received?
--     2. Check the AbortSignal wiring between those layers (signal.watch(task.cancel)) and the cancel endpoint.
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
where d.kind = 'cancel_not_propagated'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by d.detected_hlc
