-- One alert per tool with duplicate_commit findings that became true in the hour before the evaluation, with their count and the worst three (divergences).
-- name: DuplicateCommit
-- severity: critical
-- labels: priority=P1
-- for: 0s
-- group_by: kind, tool_name
-- summary: {count} {tool_name} idempotency key(s) executed twice by the third party (worst: turn {turn_id})
-- example: Idempotency key {idempotency_key} was executed twice by the third party (turn {turn_id})
-- description: The third party acknowledged one idempotency key more than once without marking the repeat as replayed: the side effect happened twice.
--     The worst: {evidence}
-- runbook: 1. Confirm with the third party (key {idempotency_key}) and reverse the duplicate.
--     2. Check that the key is made at prepare time and sent on every retry, and that the third party de-duplicates on it.
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
where d.kind = 'duplicate_commit'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by case d.severity when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end, d.detected_hlc desc  -- the worst first: the examples
