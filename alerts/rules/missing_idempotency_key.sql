-- One row per missing_idempotency_key finding that became true in the hour before the evaluation (divergences).
-- name: MissingIdempotencyKey
-- severity: info
-- labels: priority=P3
-- for: 0s
-- summary: Turn {turn_id}: side-effecting {tool_call_id} committed without an idempotency key
-- description: A retry of this call cannot be de-duplicated by the third party.
--     Evidence: {evidence}
-- runbook: Generate the key at prepare time (tool name + parsed args + user + per-turn nonce) and send it with the call.
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
where d.kind = 'missing_idempotency_key'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by d.detected_hlc
