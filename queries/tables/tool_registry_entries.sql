-- tool_registry_entries: one row per tool declared in DIR/tool_registry.toml when the catalog was written.
--   tool_name: the tool, as gen_ai.tool.name / tool.name name it.
--   tier: read_only / button_reversible / soft_irreversible / hard_irreversible; null when undeclared.
--   dispatch: eager / speculative; null when undeclared.
--   billable: whether a committed call must be charged; null when undeclared.
--   requires_approval: whether a committed call needs approval.granted first; null when undeclared.
--   owner: who to ask about the tool.
--   description: what the tool does.
create or replace table tool_registry_entries as
select tool_name, tier, dispatch, billable, requires_approval, owner, description
from registry_rows;
