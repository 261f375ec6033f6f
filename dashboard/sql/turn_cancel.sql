-- turn_cancel: the cancel of one turn ($session, $turn): origin, request, acknowledgement per layer.
-- Every turn_* query first holds the turn's traces (turn_traces_of) in a session variable, then reads only them.
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

with turn_rows as (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
)

select * from cancel_acks_of('turn_rows') where session_id = $session and turn_id = $turn;
