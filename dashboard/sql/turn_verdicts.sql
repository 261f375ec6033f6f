-- turn_verdicts: what each layer of one turn ($session, $turn) believes happened.
select * from layer_verdicts where session_id = $session and turn_id = $turn;
