-- overview_counts: turns and cancels whose turn started in [$from_ms, $to_ms] (null = unbounded), from the materialised `turns` and `cancel_acks` (a cancelled turn is one with a cancel.requested, as cancel_acks has a row for).
select
    count(*) as turns,
    count(*) filter (where exists (
        select 1 from cancel_acks as c where c.session_id = t.session_id and c.turn_id = t.turn_id)) as cancels
from turns as t
where ($from_ms is null or t.started_wall_ns >= $from_ms * 1000000)
  and ($to_ms is null or t.started_wall_ns <= $to_ms * 1000000);
