-- turn_skew: per node of one turn ($session, $turn): the largest |HLC − wall clock| of the rows it stamped.
-- Reads the rows turn_hold holds (run it first on the same cursor, as data.turn_query does).
select
    node,
    max(abs(skew_ms)) as max_skew_ms,
    quantile_cont(abs(skew_ms), 0.95) as p95_skew_ms,
    count(*) as events
from turnlens_turn_rows
where session_id = $session and turn_id = $turn and skew_ms is not null
group by node
order by max_skew_ms desc, node;
