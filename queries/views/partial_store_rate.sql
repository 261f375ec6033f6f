-- partial_store_rate: one row per day and tool, plus one per day for all tools (tool_name null): the share of tool calls that had to store a partial result.
--   day: the calls' day (wall clock of their first row).
--   tool_name: the tool; null on the all-tools row.
--   tool_calls: tool calls in the ledger.
--   partial_stored: of those, calls with a partial.stored event.
--   rate: partial_stored / tool_calls.
--   target: the rate to stay under (settings.partial_store_target, 5 %).
--   over_target: rate is above target.
create or replace view partial_store_rate as
with per_tool as (
    select
        make_timestamp(started_ns // 1000)::date as day,
        tool_name,
        count(*) as tool_calls,
        count(*) filter (where partial_stored) as partial_stored
    from side_effects
    group by grouping sets ((day, tool_name), (day))
)

select
    p.day,
    p.tool_name,
    p.tool_calls,
    p.partial_stored,
    p.partial_stored / p.tool_calls as rate,
    s.partial_store_target as target,
    p.partial_stored / p.tool_calls > s.partial_store_target as over_target
from per_tool as p
cross join settings as s;
