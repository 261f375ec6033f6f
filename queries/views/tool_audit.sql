-- tool_audit: one row per tool either declared in the registry or seen in spans: what the registry says beside what was observed.
--   tool_name: the tool.
--   registered: declared in DIR/tool_registry.toml.
--   registry_tier: the declared tier.
--   observed_tiers: tiers the spans carried, sorted; empty when none did.
--   tier_mismatch: a span carried a tier other than the declared one.
--   registry_dispatch: the declared dispatch mode.
--   observed_dispatch: dispatch modes the spans carried, sorted.
--   dispatch_mismatch: a span carried a dispatch mode other than the declared one.
--   registry_billable: declared billable.
--   billable_mismatch: a span said billable other than declared.
--   registry_requires_approval: declared as requiring approval.
--   approval_mismatch: a span said requires_approval other than declared.
--   calls: tool calls observed (a call is one tool_call_id of a turn: an id a later turn uses again is another call).
--   calls_without_tier: calls whose spans carried no tier (the registry fills it in, when it has one).
--   eager_dispatches: calls observed with dispatch eager.
--   eager_side_effects: eager_side_effect findings on this tool's calls.
--   verdict: ok, mismatch (spans and registry disagree), unregistered (seen, not declared), untiered (seen, no tier anywhere) or unused (declared, never seen).
create or replace view tool_audit as
with observed as (  -- tools the spans made claims about (tool_observed: the claims and the ledger, per tool)
    select * from tool_observed where calls > 0
),

joined as (
    select
        coalesce(r.tool_name, o.tool_name) as tool_name,
        r.tool_name is not null as registered,
        r.tier as registry_tier,
        coalesce(o.observed_tiers, []) as observed_tiers,
        coalesce(r.tier is not null and len(list_filter(o.observed_tiers, lambda x: x <> r.tier)) > 0, false)
            as tier_mismatch,
        r.dispatch as registry_dispatch,
        coalesce(o.observed_dispatch, []) as observed_dispatch,
        coalesce(r.dispatch is not null and len(list_filter(o.observed_dispatch, lambda x: x <> r.dispatch)) > 0, false)
            as dispatch_mismatch,
        r.billable as registry_billable,
        coalesce(r.billable is not null and len(list_filter(o.observed_billable, lambda x: x <> r.billable)) > 0, false)
            as billable_mismatch,
        r.requires_approval as registry_requires_approval,
        coalesce(
            r.requires_approval is not null and len(list_filter(o.observed_approval, lambda x: x <> r.requires_approval)) > 0,
            false
        ) as approval_mismatch,
        coalesce(o.calls, 0) as calls,
        coalesce(l.calls_without_tier, 0) as calls_without_tier,
        coalesce(l.calls_untiered, 0) as calls_untiered,
        coalesce(l.eager_dispatches, 0) as eager_dispatches,
        coalesce(l.eager_side_effects, 0) as eager_side_effects
    from tool_registry_entries as r
    full outer join observed as o on o.tool_name = r.tool_name
    left join tool_observed as l on l.tool_name = coalesce(r.tool_name, o.tool_name)
)

select
    tool_name,
    registered,
    registry_tier,
    observed_tiers,
    tier_mismatch,
    registry_dispatch,
    observed_dispatch,
    dispatch_mismatch,
    registry_billable,
    billable_mismatch,
    registry_requires_approval,
    approval_mismatch,
    calls,
    calls_without_tier,
    eager_dispatches,
    eager_side_effects,
    case
        when tier_mismatch or dispatch_mismatch or billable_mismatch or approval_mismatch then 'mismatch'
        when calls_untiered > 0 then 'untiered'
        when not registered then 'unregistered'
        when calls = 0 then 'unused'
        else 'ok'
    end as verdict
from joined;
