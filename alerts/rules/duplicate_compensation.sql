-- One row per duplicate_compensation finding that became true in the hour before the evaluation (divergences).
-- name: DuplicateCompensation
-- severity: warning
-- labels: priority=P2
-- for: 0s
-- summary: Idempotency key {idempotency_key} was compensated twice (turn {turn_id})
-- description: One side effect was undone more than once: a refund or a deletion may have been applied twice.
--     Evidence: {evidence}
-- runbook: Check the compensation with the third party; make the compensation idempotent on the same key.
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
where d.kind = 'duplicate_compensation'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by d.detected_hlc
