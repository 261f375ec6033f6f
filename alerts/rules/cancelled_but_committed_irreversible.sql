-- One alert per tool with cancelled_but_committed findings of a soft- or hard-irreversible tool in the hour before the evaluation, with their count and the worst three (divergences).
-- name: CancelledButCommittedIrreversible
-- severity: critical
-- labels: priority=P1
-- for: 0s
-- group_by: kind, tool_name
-- summary: {count} irreversible {tool_name} call(s) changed the world although the user pressed stop (worst: turn {turn_id})
-- example: Turn {turn_id}: {tool_call_id} changed the world irreversibly although the user pressed stop
-- description: An irreversible tool call (soft or hard) committed after the cancel, or before it without compensation or a receipt shown to the user. The user believes it did not happen.
--     The worst: {evidence}
-- runbook: 1. Read the evidence and the turn's ledger; contact the third party with the idempotency key {idempotency_key} to confirm what was executed.
--     2. Tell the user what happened (the receipt the product failed to show) and undo by hand where possible.
--     3. Fix the cause: make the tool speculative (buffered until the stream ends, behind approval) or have the cancel handler compensate it.
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
  and s.tier in ('soft_irreversible', 'hard_irreversible')
order by case d.severity when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end, d.detected_hlc desc  -- the worst first: the examples
