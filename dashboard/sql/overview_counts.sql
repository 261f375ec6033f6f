-- overview_counts: turns and cancels whose turn started in [$from_ms, $to_ms] (null = unbounded), from the cheap turn_events rather than turns (which waits on every detector).
with turn_starts as (
    select session_id, turn_id, min(wall_ns) as started_ns, bool_or(step = 'cancel.requested') as cancelled
    from turn_events
    group by all
)

select count(*) as turns, count(*) filter (where cancelled) as cancels
from turn_starts
where ($from_ms is null or started_ns >= $from_ms * 1000000)
  and ($to_ms is null or started_ns <= $to_ms * 1000000);
