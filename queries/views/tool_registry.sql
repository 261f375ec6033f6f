-- tool_registry: one row per tool declared in DIR/tool_registry.toml, with how often it was observed.
--   tool_name: the tool.
--   tier: the declared tier.
--   dispatch: the declared dispatch mode (eager / speculative).
--   billable: declared billable.
--   requires_approval: declared as requiring approval (hard_irreversible implies it).
--   owner: who to ask.
--   description: what the tool does.
--   calls: tool calls of this tool in the ledger.
--   first_seen_ns: its first call, Unix nanoseconds; null when never called.
--   last_seen_ns: its latest call, Unix nanoseconds; null when never called.
create or replace view tool_registry as
with observed as (
    select tool_name, count(*) as calls, min(started_ns) as first_seen_ns, max(started_ns) as last_seen_ns
    from side_effects
    where tool_name is not null
    group by tool_name
)

select
    r.tool_name,
    r.tier,
    r.dispatch,
    r.billable,
    coalesce(r.requires_approval, false) or r.tier = 'hard_irreversible' as requires_approval,
    r.owner,
    r.description,
    coalesce(o.calls, 0) as calls,
    o.first_seen_ns,
    o.last_seen_ns
from tool_registry_entries as r
left join observed as o using (tool_name);
