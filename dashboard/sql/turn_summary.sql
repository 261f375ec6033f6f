-- turn_summary: the one turn ($session, $turn) as the turns view sees it.
-- Over the turn's traces and the traces sharing its idempotency keys (its findings count needs them).
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

set variable turnlens_turn_traces = key_traces_of(getvariable('turnlens_turn_traces'));

with turn_rows as materialized (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
),

turn_ledger as (select * from side_effects_of('turn_rows')),

turn_findings as (select * from divergences_of('turn_rows')),

turn_acks as (select * from cancel_acks_of('turn_rows'))

select *
from turns_of('turn_rows', 'turn_ledger', 'turn_findings', 'turn_acks')
where session_id = $session and turn_id = $turn;
