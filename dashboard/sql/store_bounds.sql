-- store_bounds: the wall-clock span of the store's turns, in Unix ms; time windows end at `newest_ms`.
select
    min(started_wall_ns) // 1000000 as oldest_ms,
    max(coalesce(ended_wall_ns, started_wall_ns)) // 1000000 as newest_ms,
    count(*) as turns
from turns;
