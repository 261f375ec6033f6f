-- One row when the P95 cancel-to-ack latency of the cancels requested in the last 5 minutes exceeds 100 ms.
-- name: CancelToAckP95Slow
-- severity: warning
-- labels: priority=P2
-- for: 5m
-- summary: Cancel-to-ack P95 is {value} ms over the last 5 minutes (objective: under 100 ms)
-- description: Across {cancels} cancels requested in the last five minutes, the 95th percentile from
--     cancel.requested to the last cancel.acknowledged is {value} ms, and has stayed above 100 ms for
--     five minutes. The cancel path of the protocol layer is degraded: users who press stop keep
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
      and requested_hlc > $at_hlc - (5 * 60 * 1000::bigint << 16)
)

select
    count(*) as annotation_cancels,
    quantile_cont(latency_ms, 0.95) as value
from window_cancels
having count(*) > 0 and quantile_cont(latency_ms, 0.95) > 100
