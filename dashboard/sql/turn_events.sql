-- turn_events: every event of one turn ($session, $turn) from `turn_timeline`, in causal (HLC) order with the wall-clock order beside it.
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

select *
from turn_timeline_in(getvariable('turnlens_turn_traces'))
where session_id = $session and turn_id = $turn
order by seq;
