-- The newest turns by their first span, read from the spans alone (no detector runs): where to start looking.
--   $limit: how many turns.
select session_id, turn_id, make_timestamp(min(wall_ns) // 1000) as started_at, count(*) as spans
from spans
group by session_id, turn_id
order by min(wall_ns) desc, turn_id
limit $limit::integer;
