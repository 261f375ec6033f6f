-- One turn as the turns view sees it (its turns row): status, span counts, tool calls, findings.
--   $session: the session_id.
--   $turn: the turn_id.
-- Computed over the turn's traces and those sharing its idempotency keys (the findings count needs them).
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

set variable turnlens_turn_traces = key_traces_of(getvariable('turnlens_turn_traces'));

with turn_rows as materialized (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
),

turn_ledger as (
    select * from side_effects_of('turn_rows')
),

turn_findings as (
    select * from divergences_of('turn_rows')
),

turn_acks as (
    select * from cancel_acks_of('turn_rows')
)

select *
from turns_of('turn_rows', 'turn_ledger', 'turn_findings', 'turn_acks')
where session_id = $session::varchar and turn_id = $turn::varchar;
