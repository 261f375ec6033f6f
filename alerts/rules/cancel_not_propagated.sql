-- One alert per kind with cancel_not_propagated findings that became true in the hour before the evaluation, with their count and the worst three (divergences).
-- name: CancelNotPropagated
-- severity: warning
-- labels: priority=P2
-- for: 0s
-- group_by: kind
-- summary: {count} cancel(s) did not reach every layer (worst: turn {turn_id})
-- example: Turn {turn_id}: the cancel did not reach every layer
-- description: A cancel reached some layers but not the runtime, or not the tool layer while a tool call ran, or no layer acknowledged it.
--     The worst: {evidence}
-- runbook: 1. Look at the turn's verdict matrix: which layer never saw cancel.received?
--     2. Check the AbortSignal wiring between those layers (signal.watch(task.cancel)) and the cancel endpoint.
--     Export the worst turn for the review: `turnlens export --store DIR --session {session_id} --turn {turn_id} --format html --out incident.html`.
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
order by case d.severity when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end, d.detected_hlc desc  -- the worst first: the examples
