-- One alert per tool with cancelled_but_committed findings of a reversible or untiered tool in the hour before the evaluation, with their count and the worst three (divergences).
-- name: CancelledButCommitted
-- severity: warning
-- labels: priority=P2
-- for: 0s
-- group_by: kind, tool_name
-- summary: {count} {tool_name} call(s) committed although the user pressed stop (worst: turn {turn_id})
-- example: Turn {turn_id}: {tool_call_id} committed although the user pressed stop
-- description: A reversible (or untiered) side-effecting call committed after the cancel, or before it without compensation or a receipt shown to the user.
--     The worst: {evidence}
-- runbook: 1. Check the ledger of the turn: was the call compensated later, or can the user undo it (button-reversible)?
--     2. Make the cancel handler compensate committed eager calls, or show a transcript receipt with an undo.
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
where d.kind = 'cancelled_but_committed'
  and d.detected_hlc <= $at_hlc
  and d.detected_hlc > $at_hlc - (3600 * 1000::bigint << 16)
  and (s.tier is null or s.tier not in ('soft_irreversible', 'hard_irreversible'))
order by case d.severity when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end, d.detected_hlc desc  -- the worst first: the examples
