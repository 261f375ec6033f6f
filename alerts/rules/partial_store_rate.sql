-- One row when more than 5 % of the tool calls started in the last hour had to store a partial result (at least 20 calls).
-- name: PartialStoreRateHigh
-- severity: warning
-- labels: priority=P2
-- for: 10m
-- summary: {value} of tool calls stored a partial result in the last hour (target under {target})
-- description: {partial} of {calls} tool calls dispatched in the last hour were cut short and stored a
--     partial result (partial.stored); the most affected tool: {worst_tool}. Partial results are what a
--     cancel or a failure leaves behind; a rate above the target means users stop turns mid-tool or tools
--     fail often, and every partial result is a resume path that must work.
-- runbook: 1. `turnlens query --store DIR "select * from partial_store_rate order by day desc, rate desc"`: which tools?
--     2. Tools failing: their own error logs (tool.failed). Users cancelling: cancel origins in cancel_acks.
--     3. The target is settings.partial_store_target.
with calls as (  -- calls by the HLC of their first phase, as known at the evaluation time
    select
        tool_name,
        partial_stored
    from side_effects
    where coalesce(buffered_hlc, dispatched_hlc, prepared_hlc, committed_hlc) <= $at_hlc
      and coalesce(buffered_hlc, dispatched_hlc, prepared_hlc, committed_hlc) > $at_hlc - (3600 * 1000::bigint << 16)
),

per_tool as (
    select tool_name, count(*) filter (where partial_stored) as partial
    from calls
    group by tool_name
)

select
    round(count(*) filter (where c.partial_stored) / count(*), 4) as value,
    count(*) filter (where c.partial_stored) as annotation_partial,
    count(*) as annotation_calls,
    any_value(settings.partial_store_target) as annotation_target,
    (select arg_max(tool_name, partial) from per_tool) as annotation_worst_tool
from calls as c, settings
having count(*) >= 20
   and count(*) filter (where c.partial_stored) / count(*) > any_value(settings.partial_store_target)
