-- What the store holds: spans (counted once), traces, sessions and turns, and the wall-clock time they cover.
select
    count(*) as spans,
    count(distinct trace_id) as traces,
    count(distinct session_id) as sessions,
    count(distinct turn_id) as turns,
    make_timestamp(min(wall_ns) // 1000) as first_span_at,
    make_timestamp(max(wall_ns) // 1000) as last_span_at
from spans;
