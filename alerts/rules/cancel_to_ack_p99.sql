-- One row when the P99 cancel-to-ack latency of the cancels requested in the last minute exceeds 500 ms.
-- name: CancelToAckP99Lost
-- severity: critical
-- labels: priority=P1
-- for: 1m
-- summary: Cancel-to-ack P99 is {value} ms over the last minute (page above 500 ms)
-- description: Across {cancels} cancels requested in the last minute, the 99th percentile from
--     cancel.requested to the last cancel.acknowledged is {value} ms, and has stayed above 500 ms for
--     a minute. Some cancel signals are lost outright: users who press stop keep
--     receiving tokens, and tool calls keep being dispatched after the stop.
-- runbook: 1. `turnlens query --store DIR "select * from cancel_acks order by requested_hlc desc limit 50"`:
--     which layer acknowledges late (http_ack_ms, stream_ack_ms, runtime_ack_ms, tool_ack_ms)?
--     2. A slow tool_ack_ms: tools that do not watch the AbortSignal; a slow runtime_ack_ms: the loop
--        waits for a tool call to return before it checks for the cancel.
--     3. A cancel never acknowledged counts here as the time elapsed since it was requested.
with window_cancels as (  -- as known at the evaluation time: an ack after it is not yet an ack
    select
        case
            when acked_hlc is not null and acked_hlc <= $at_hlc then cancel_to_ack_ms
            else $at_ms - (requested_hlc >> 16)
        end as latency_ms
    from cancel_acks
    where requested_hlc <= $at_hlc
      and requested_hlc > $at_hlc - (60 * 1000::bigint << 16)
)

select
    count(*) as annotation_cancels,
    quantile_cont(latency_ms, 0.99) as value
from window_cancels
having count(*) > 0 and quantile_cont(latency_ms, 0.99) > 500
