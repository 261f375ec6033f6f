-- The wall-clock span of the store's turns in Unix ms: when the oldest started, and when the newest was last seen (the newest data, where `--at newest` and the dashboard's windows end).
select
    min(started_wall_ns) // 1000000 as oldest_ms,
    max(last_seen_wall_ns) // 1000000 as newest_ms
from turns;
