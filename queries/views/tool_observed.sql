-- tool_observed: one row per tool seen in the spans or the ledger: what the spans showed of its calls, the sums tool_audit sets beside the registry.
-- Every column is a sum or a union of distinct values, so the rows of two sets of turns add up to those of both: a
-- store with derived state keeps them per partition (a rollup written with the partition's files) and adds up
-- only those and the rows of the partitions deltas still touch (derived/snapshot.sql), not every call's row.
--   tool_name: the tool.
--   calls: tool calls whose spans made claims about it (tool_claims rows: a call is one tool_call_id of a turn).
--   observed_tiers: tiers the spans carried, sorted.
--   observed_dispatch: dispatch modes the spans carried, sorted.
--   observed_billable: billable flags the spans carried, sorted.
--   observed_approval: requires_approval flags the spans carried, sorted.
--   calls_without_tier: ledger calls whose tier did not come from a span (the registry filled it in, or none did).
--   calls_untiered: ledger calls with no tier at all.
--   eager_dispatches: ledger calls dispatched eager.
--   eager_side_effects: eager_side_effect findings on its calls.
-- tool_observed_of(claims, effects, findings): the same over relations with tool_claims', side_effects' and
-- divergences' columns, named by string (one partition's files, for its rollup).
create or replace macro tool_observed_of(claims, effects, findings) as table
with observed as (  -- the spans' own claims, before the registry fills anything in
    select
        tool_name,
        count(*)::bigint as calls,
        list_sort(list_distinct(flatten(list(tiers)))) as observed_tiers,
        list_sort(list_distinct(flatten(list(dispatches)))) as observed_dispatch,
        list_sort(list_distinct(flatten(list(billables)))) as observed_billable,
        list_sort(list_distinct(flatten(list(approvals)))) as observed_approval
    from query_table(claims)
    where tool_name is not null
    group by tool_name
),

ledger as (
    select
        tool_name,
        count(*) filter (where tier_source is distinct from 'span')::bigint as calls_without_tier,
        count(*) filter (where tier is null)::bigint as calls_untiered,
        count(*) filter (where dispatch = 'eager')::bigint as eager_dispatches
    from query_table(effects)
    where tool_name is not null
    group by tool_name
),

eager_findings as (
    select c.tool_name, count(*)::bigint as eager_side_effects
    from query_table(findings) as d
    join query_table(effects) as c using (session_id, turn_id, tool_call_id)
    where d.kind = 'eager_side_effect' and c.tool_name is not null
    group by c.tool_name
)

select
    tool_name,
    coalesce(o.calls, 0)::bigint as calls,
    coalesce(o.observed_tiers, []) as observed_tiers,
    coalesce(o.observed_dispatch, []) as observed_dispatch,
    coalesce(o.observed_billable, []) as observed_billable,
    coalesce(o.observed_approval, []) as observed_approval,
    coalesce(l.calls_without_tier, 0)::bigint as calls_without_tier,
    coalesce(l.calls_untiered, 0)::bigint as calls_untiered,
    coalesce(l.eager_dispatches, 0)::bigint as eager_dispatches,
    coalesce(f.eager_side_effects, 0)::bigint as eager_side_effects
from observed as o
full outer join ledger as l using (tool_name)
full outer join eager_findings as f using (tool_name);

create or replace view tool_observed as
select * from tool_observed_of('tool_claims', 'side_effects', 'divergences');
