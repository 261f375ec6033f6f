-- turn_skew: per node of one turn ($session, $turn): the largest |HLC − wall clock| of the rows it stamped.
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

select
    node,
    max(abs(skew_ms)) as max_skew_ms,
    quantile_cont(abs(skew_ms), 0.95) as p95_skew_ms,
    count(*) as events
from turn_events_in(getvariable('turnlens_turn_traces'))
where session_id = $session and turn_id = $turn and skew_ms is not null
group by node
order by max_skew_ms desc;
