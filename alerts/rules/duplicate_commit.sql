-- One row per duplicate_commit finding that became true in the hour before the evaluation (divergences).
-- name: DuplicateCommit
-- severity: critical
-- labels: priority=P1
-- for: 0s
-- summary: Idempotency key {idempotency_key} was executed twice by the third party (turn {turn_id})
-- description: The third party acknowledged one idempotency key more than once without marking the repeat as replayed: the side effect happened twice.
--     Evidence: {evidence}
-- runbook: 1. Confirm with the third party (key {idempotency_key}) and reverse the duplicate.
--     2. Check that the key is made at prepare time and sent on every retry, and that the third party de-duplicates on it.
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
where d.kind = 'duplicate_commit'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by d.detected_hlc
