-- One alert per tool with untiered_tool findings that became true in the hour before the evaluation, with their count and the worst three (divergences).
-- name: UntieredTool
-- severity: info
-- labels: priority=P3
-- for: 0s
-- group_by: kind, tool_name
-- summary: Tool {tool_name} has no reversibility tier ({count} finding(s); first: turn {turn_id})
-- example: Turn {turn_id}: {tool_call_id} belongs to a tool without a reversibility tier
-- description: Neither the spans nor the tool registry give the tool a tier; it is treated as eager when unknown.
--     The worst: {evidence}
-- runbook: Add the tool to the registry file with its tier and dispatch mode.
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
where d.kind = 'untiered_tool'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by case d.severity when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end, d.detected_hlc desc  -- the worst first: the examples
