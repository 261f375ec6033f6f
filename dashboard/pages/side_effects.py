"""Side effects: the ledger across sessions, narrowed to the calls that went wrong (unbilled, unapproved…)."""

from __future__ import annotations

import streamlit as st
from turnlens.dashboard import common, data, filters
from turnlens.kernel import findings

ROW_LIMIT = 5000
LEDGER_KINDS = list(findings.SIDE_EFFECT_KINDS)  # the finding kinds that are about one side effect
# What an SRE reads first; every other column of `side_effects` follows.
LEADING_COLUMNS = [
    "open",
    "tool_name",
    "tier",
    "status",
    "finding_kinds",
    "session_id",
    "turn_id",
    "tool_call_id",
]
TIERS = ["read_only", "button_reversible", "soft_irreversible", "hard_irreversible"]

st.title("Side effects")
st.caption("Every tool call with the HLC of each phase of its life, and the findings that name it.")
common.snapshot_caption()
top = st.columns([1, 4, 3])
with top[0]:
    range_key = filters.time_range()
with top[1]:
    kinds = filters.multiselect(
        "Only calls with finding", LEDGER_KINDS, param="kind", placeholder="any call (pick kinds to narrow)"
    )
with top[2]:
    tiers = filters.multiselect("Tier", TIERS, param="tier")
from_ms, to_ms = common.time_window(range_key)
ledger = data.query(
    "side_effects_ledger", from_ms=from_ms, to_ms=to_ms, kinds=kinds, tiers=tiers, limit=ROW_LIMIT
)

if not len(ledger):
    common.empty("No tool call matches.")
    st.stop()

counts = ledger["finding_kinds"].explode().value_counts()
tiles = st.columns(5)
tiles[0].metric("Calls", f"{len(ledger):,}" + ("+" if len(ledger) >= ROW_LIMIT else ""), border=True)
for tile, (label, kind) in zip(
    tiles[1:],
    [
        ("Unbilled", "unbilled_side_effect"),
        ("Unapproved", "unapproved_side_effect"),
        ("Duplicate commits", "duplicate_commit"),
        ("Ghost commits", "ghost_commit"),
    ],
    strict=True,
):
    tile.metric(label, int(counts.get(kind, 0)), border=True)

table = common.with_turn_links(common.hlc_columns(ledger))
table["finding_kinds"] = table["finding_kinds"].map(lambda kinds: ", ".join(kinds))
st.dataframe(
    table,
    column_order=[c for c in LEADING_COLUMNS if c in table] + [c for c in table if c not in LEADING_COLUMNS],
    hide_index=True,
    width="stretch",
    height=min(38 + 35 * len(table), 700),
    column_config={"open": common.turn_link_column()},
)
