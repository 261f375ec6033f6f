-- overview_counts: turns and cancels whose turn started in [$from_ms, $to_ms] (null = unbounded; a cancelled turn is one with a cancel.requested, as cancel_acks has a row for). The minutes wholly inside the window come from turn_minutes (a few rows per partition with derived state), the turns of the one or two minutes the window cuts from `turns` and `cancel_acks` (their files' statistics skip every other partition).
select
    coalesce(sum(turns), 0)::bigint as turns,
    coalesce(sum(cancels), 0)::bigint as cancels
from (
    select turns, cancelled as cancels
    from turn_minutes
    where ($from_ms is null or epoch_ms(minute) >= $from_ms)
      and ($to_ms is null or epoch_ms(minute) + 60000 <= $to_ms)
    union all
    select
        count(*) as turns,
        count(*) filter (where exists (
            select 1 from cancel_acks as c where c.session_id = t.session_id and c.turn_id = t.turn_id)) as cancels
    from turns as t
    where ($from_ms is null or t.started_wall_ns >= $from_ms * 1000000)
      and ($to_ms is null or t.started_wall_ns <= $to_ms * 1000000)
      and (  -- in a minute the window cuts: the first (it starts after the minute did) or the last
          ($from_ms is not null and t.started_wall_ns < ($from_ms + 59999) // 60000 * 60000 * 1000000)
          or ($to_ms is not null and t.started_wall_ns >= $to_ms // 60000 * 60000 * 1000000)
      )
);
