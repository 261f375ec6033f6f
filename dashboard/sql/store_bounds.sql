-- store_bounds: the wall-clock span of the store's turns (first row of the oldest, last row of the newest), in Unix ms; time windows end at `newest_ms`.
select
    min(started_wall_ns) // 1000000 as oldest_ms,
    max(last_seen_wall_ns) // 1000000 as newest_ms
from turns;
