-- One turn's side-effect ledger: every tool call and the HLC of each phase.
--   $session: the session_id.
--   $turn: the turn_id.
select *
from side_effects
where session_id = $session::varchar and turn_id = $turn::varchar
order by coalesce(dispatched_hlc, buffered_hlc, prepared_hlc, committed_hlc), tool_call_id;
