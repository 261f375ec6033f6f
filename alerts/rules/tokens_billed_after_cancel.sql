-- One alert per kind with tokens_billed_after_cancel findings that became true in the hour before the evaluation, with their count and the worst three (divergences).
-- name: TokensBilledAfterCancel
-- severity: warning
-- labels: priority=P3
-- for: 0s
-- group_by: kind
-- summary: {count} cancelled turn(s) billed more tokens than streamed before the cancel (worst: turn {turn_id})
-- example: Turn {turn_id}: more tokens billed than streamed before the cancel
-- description: The tokens charged for a cancelled turn exceed the tokens the user saw before pressing stop.
--     The worst: {evidence}
-- runbook: Check how the runtime meters a cancelled generation; bill the tokens streamed up to the cancel.
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
where d.kind = 'tokens_billed_after_cancel'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
order by case d.severity when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end, d.detected_hlc desc  -- the worst first: the examples
