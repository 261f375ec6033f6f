-- One row per causal_inversion finding that became true in the hour before the evaluation (divergences).
-- name: CausalInversion
-- severity: info
-- labels: priority=P3
-- for: 0s
-- summary: Turn {turn_id}: wall clocks contradict the HLC order
-- description: Two events of the turn are ordered one way by wall clock and the other way by HLC, beyond the clock resolution.
--     Evidence: {evidence}
-- runbook: Usually clock skew between nodes: check HlcSkewBeyondTolerance and the nodes' NTP; trust the HLC order.
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
where d.kind = 'causal_inversion'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by d.detected_hlc
