-- overview_cancel_slo: cancel-to-ack latency percentiles of the cancels requested in [$from_ms, $to_ms].
select
    count(cancel_to_ack_ms) as cancels_acked,
    count(*) - count(cancel_to_ack_ms) as cancels_never_acked,
    quantile_cont(cancel_to_ack_ms, 0.95) as p95_ms,
    quantile_cont(cancel_to_ack_ms, 0.99) as p99_ms,
    avg((cancel_to_ack_ms > 100)::int) as share_over_100ms
from cancel_acks
where ($from_ms is null or requested_hlc >> 16 >= $from_ms)
  and ($to_ms is null or requested_hlc >> 16 <= $to_ms);
