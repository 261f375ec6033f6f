-- store_bounds: the wall-clock span of the store's turn events, in Unix ms; time windows end at `newest_ms`.
select
    min(wall_ns) // 1000000 as oldest_ms,
    max(wall_ns) // 1000000 as newest_ms
from turn_events;
