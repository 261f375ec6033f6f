-- One alert per kind with causal_inversion findings that became true in the hour before the evaluation, with their count and the worst three (divergences).
-- name: CausalInversion
-- severity: info
-- labels: priority=P3
-- for: 0s
-- group_by: kind
-- summary: {count} turn(s) whose wall clocks contradict the HLC order (worst: turn {turn_id})
-- example: Turn {turn_id}: wall clocks contradict the HLC order
-- description: Two events of the turn are ordered one way by wall clock and the other way by HLC, beyond the clock resolution.
--     The worst: {evidence}
-- runbook: Usually clock skew between nodes: check HlcSkewBeyondTolerance and the nodes' NTP; trust the HLC order.
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
where d.kind = 'causal_inversion'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by case d.severity when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end, d.detected_hlc desc  -- the worst first: the examples
