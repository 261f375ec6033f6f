-- One turn's side-effect ledger: every tool call and the HLC of each phase.
--   $session: the session_id.
--   $turn: the turn_id.
-- The ledger of the turn's traces only (turn_traces_of, held in a session variable): a call's rows are in its turn.
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

with turn_rows as (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
)

select *
from side_effects_of('turn_rows')
where session_id = $session::varchar and turn_id = $turn::varchar
order by coalesce(dispatched_hlc, buffered_hlc, prepared_hlc, committed_hlc), tool_call_id;
