-- One turn's usage (its turn_usage row): tokens streamed and billed, what was charged, known / partial / unknown.
--   $session: the session_id.
--   $turn: the turn_id.
-- Computed over the turn's traces only (turn_traces_of, held in a session variable).
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

with turn_rows as materialized (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
),

turn_acks as (
    select * from cancel_acks_of('turn_rows')
)

select *
from turn_usage_of('turn_rows', 'turn_acks')
where session_id = $session::varchar and turn_id = $turn::varchar;
