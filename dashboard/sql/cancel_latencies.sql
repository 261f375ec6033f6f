-- cancel_latencies: one row per cancelled turn in [$from_ms, $to_ms]: when the stop was pressed and how long until every layer acknowledged it.
select
    session_id,
    turn_id,
    origin,
    requested_at,
    cancel_to_ack_ms
from cancel_acks
where ($from_ms is null or requested_hlc >> 16 >= $from_ms)
  and ($to_ms is null or requested_hlc >> 16 <= $to_ms)
order by requested_hlc
limit 5000;
