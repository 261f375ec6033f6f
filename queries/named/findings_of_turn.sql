-- One turn's findings, in the order they became true.
--   $session: the session_id.
--   $turn: the turn_id.
select kind, severity, tool_call_id, idempotency_key, detected_at, evidence
from divergences
where session_id = $session::varchar and turn_id = $turn::varchar
order by detected_hlc, kind;
