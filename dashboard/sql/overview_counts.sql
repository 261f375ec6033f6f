-- overview_counts: turns, cancels and findings whose turn started in [$from_ms, $to_ms] (null = unbounded).
select
    count(*) as turns,
    count(*) filter (where status = 'cancelled') as cancels,
    count(*) filter (where status = 'open') as open_turns,
    coalesce(sum(findings), 0) as findings,
    coalesce(sum(side_effects), 0) as side_effects
from turns
where ($from_ms is null or started_wall_ns >= $from_ms * 1000000)
  and ($to_ms is null or started_wall_ns <= $to_ms * 1000000);
