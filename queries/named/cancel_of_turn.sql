-- One turn's cancel (its cancel_acks row): origin, request, acknowledgement per layer; no row when it was not stopped.
--   $session: the session_id.
--   $turn: the turn_id.
-- Computed over the turn's traces only (turn_traces_of, held in a session variable).
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

with turn_rows as (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
)

select *
from cancel_acks_of('turn_rows')
where session_id = $session::varchar and turn_id = $turn::varchar;
