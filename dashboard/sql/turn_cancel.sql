-- turn_cancel: the cancel of one turn ($session, $turn): origin, request, acknowledgement per layer.
-- Every turn_* query reads the rows turn_hold holds (run it first on the same cursor, as data.turn_query does).
select * from cancel_acks_of('turnlens_turn_rows') where session_id = $session and turn_id = $turn;
