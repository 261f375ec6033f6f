-- turn_events: every event of one turn ($session, $turn) from `turn_timeline`, in causal (HLC) order with the wall-clock order beside it.
select * from turn_timeline where session_id = $session and turn_id = $turn order by seq;
