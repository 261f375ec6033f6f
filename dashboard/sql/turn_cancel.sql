-- turn_cancel: the cancel of one turn ($session, $turn): origin, request, acknowledgement per layer.
select * from cancel_acks where session_id = $session and turn_id = $turn;
