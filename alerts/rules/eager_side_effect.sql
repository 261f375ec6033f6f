-- One row per eager_side_effect finding that became true in the hour before the evaluation (divergences).
-- name: EagerSideEffect
-- severity: warning
-- labels: priority=P2
-- for: 0s
-- summary: Turn {turn_id}: irreversible {tool_call_id} was dispatched while the stream was still running
-- description: A soft- or hard-irreversible call was dispatched eagerly; a stop pressed now cannot prevent it.
--     Evidence: {evidence}
-- runbook: Make the tool speculative: buffer it until the stream ends cleanly, with approval for hard-irreversible tools (tool registry: dispatch = speculative).
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
where d.kind = 'eager_side_effect'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by d.detected_hlc
