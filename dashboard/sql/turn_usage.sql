-- turn_usage: tokens and cost of one turn ($session, $turn), and whether usage is known.
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

with turn_rows as materialized (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
),

turn_acks as (select * from cancel_acks_of('turn_rows'))

select * from turn_usage_of('turn_rows', 'turn_acks') where session_id = $session and turn_id = $turn;
