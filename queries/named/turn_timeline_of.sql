-- One turn's events in causal (HLC) order, with the wall-clock order beside it.
--   $session: the session_id.
--   $turn: the turn_id.
select *
from turn_timeline
where session_id = $session::varchar and turn_id = $turn::varchar
order by seq;
