-- overview_skew: per node, the largest HLC skew seen in [$from_ms, $to_ms] and the tolerance it is held to.
select
    node,
    max(max_skew_ms) as max_skew_ms,
    max(p95_skew_ms) as p95_skew_ms,
    sum(events) as events,
    max(tolerance_ms) as tolerance_ms
from node_skew
where ($from_ms is null or epoch_ms(minute) >= $from_ms - 60000)
  and ($to_ms is null or epoch_ms(minute) <= $to_ms)
group by node
order by max_skew_ms desc;
