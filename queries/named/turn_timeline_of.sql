-- One turn's events in causal (HLC) order, with the wall-clock order beside it.
--   $session: the session_id.
--   $turn: the turn_id.
-- First the turn's traces from narrow columns (turn_traces_of), held in a session variable so the list is a constant
-- that reaches the Parquet scan; then the timeline of those traces only. The variable is read by this query alone,
-- never by a view.
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

select *
from turn_timeline_in(getvariable('turnlens_turn_traces'))
where session_id = $session::varchar and turn_id = $turn::varchar
order by seq;
