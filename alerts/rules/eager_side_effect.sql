-- One alert per tool with eager_side_effect findings that became true in the hour before the evaluation, with their count and the worst three (divergences).
-- name: EagerSideEffect
-- severity: warning
-- labels: priority=P2
-- for: 0s
-- group_by: kind, tool_name
-- summary: {count} irreversible {tool_name} call(s) dispatched while the stream was still running (worst: turn {turn_id})
-- example: Turn {turn_id}: irreversible {tool_call_id} was dispatched while the stream was still running
-- description: A soft- or hard-irreversible call was dispatched eagerly; a stop pressed now cannot prevent it.
--     The worst: {evidence}
-- runbook: Make the tool speculative: buffer it until the stream ends cleanly, with approval for hard-irreversible tools (tool registry: dispatch = speculative).
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
where d.kind = 'eager_side_effect'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by case d.severity when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end, d.detected_hlc desc  -- the worst first: the examples
