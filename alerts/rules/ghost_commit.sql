-- One alert per tool with ghost_commit findings that became true in the hour before the evaluation, with their count and the worst three (divergences).
-- name: GhostCommit
-- severity: critical
-- labels: priority=P1
-- for: 0s
-- group_by: kind, tool_name
-- summary: {count} {tool_name} call(s) executed by the third party although the tool layer reports them failed, cancelled or discarded (worst: turn {turn_id})
-- example: Turn {turn_id}: the third party executed {tool_call_id}, which the tool layer reports failed, cancelled or discarded
-- description: The third party acknowledged a call that the tool layer believes never committed: the world changed and no log of ours says so.
--     The worst: {evidence}
-- runbook: 1. Confirm with the third party what was executed, and tell the user.
--     2. The tool must record the commit it cannot rule out: treat a timeout after send as committed-unknown, reconcile by idempotency key.
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
where d.kind = 'ghost_commit'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by case d.severity when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end, d.detected_hlc desc  -- the worst first: the examples
