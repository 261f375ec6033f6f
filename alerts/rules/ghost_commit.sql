-- One row per ghost_commit finding that became true in the hour before the evaluation (divergences).
-- name: GhostCommit
-- severity: critical
-- labels: priority=P1
-- for: 0s
-- summary: Turn {turn_id}: the third party executed {tool_call_id}, which the tool layer reports failed, cancelled or discarded
-- description: The third party acknowledged a call that the tool layer believes never committed: the world changed and no log of ours says so.
--     Evidence: {evidence}
-- runbook: 1. Confirm with the third party what was executed, and tell the user.
--     2. The tool must record the commit it cannot rule out: treat a timeout after send as committed-unknown, reconcile by idempotency key.
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
where d.kind = 'ghost_commit'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by d.detected_hlc
