-- turn_events: every event of one turn ($session, $turn) in HLC order, with its wall-clock order beside it.
select * from turn_timeline where session_id = $session and turn_id = $turn order by seq;
