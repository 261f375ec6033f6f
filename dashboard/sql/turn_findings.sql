-- turn_findings: the findings of one turn ($session, $turn), in the order they became true.
-- Findings of one instant (one cancel judges several calls) come in kind and call order.
-- Over the rows turn_hold holds: the turn's traces and the traces sharing its idempotency keys (detectors match keys across turns).
select *
from divergences_of('turnlens_turn_rows')
where session_id = $session and turn_id = $turn
order by detected_hlc, kind, tool_call_id;
