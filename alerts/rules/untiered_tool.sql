-- One row per untiered_tool finding that became true in the hour before the evaluation (divergences).
-- name: UntieredTool
-- severity: info
-- labels: priority=P3
-- for: 0s
-- summary: Turn {turn_id}: {tool_call_id} belongs to a tool without a reversibility tier
-- description: Neither the spans nor the tool registry give the tool a tier; it is treated as eager when unknown.
--     Evidence: {evidence}
-- runbook: Add the tool to the registry file with its tier and dispatch mode.
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
where d.kind = 'untiered_tool'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by d.detected_hlc
