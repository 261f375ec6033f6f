-- turn_usage: tokens and cost of one turn ($session, $turn), and whether usage is known.
select * from turn_usage where session_id = $session and turn_id = $turn;
