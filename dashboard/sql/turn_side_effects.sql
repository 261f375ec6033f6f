-- turn_side_effects: the side-effect ledger of one turn ($session, $turn), in dispatch order.
select * from side_effects where session_id = $session and turn_id = $turn order by coalesce(dispatched_hlc, buffered_hlc);
