-- turn_summary: the one turn ($session, $turn) as the turns view sees it.
select * from turns where session_id = $session and turn_id = $turn;
