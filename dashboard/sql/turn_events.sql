-- turn_events: every event of one turn ($session, $turn) from `turn_timeline`, in causal (HLC) order with the wall-clock order beside it.
-- Reads the rows turn_hold holds (run it first on the same cursor, as data.turn_query does).
select *
from turnlens_turn_timeline
where session_id = $session and turn_id = $turn
order by seq;
