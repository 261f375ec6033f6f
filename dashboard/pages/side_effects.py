"""Side effects: the ledger across sessions, narrowed to the calls that went wrong (unbilled, unapproved…)."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from turnlens.dashboard import common, data, filters
from turnlens.kernel import findings

ROW_LIMIT = 5000
LEDGER_KINDS = list(findings.SIDE_EFFECT_KINDS)  # the finding kinds that are about one side effect
# What an SRE reads first, the phases of each call in the order they happen; "All columns" adds the rest
# (session and turn among them: `open` opens the turn). The widths add up to the table's 980 px at a 1440 px
# wide window with the sidebar open, so every leading column shows without scrolling sideways.
LEADING_COLUMNS = [
    "open",
    "tool_name",
    "tier",
    "status",
    "finding_kinds",
    "dispatched_hlc",
    "committed_hlc",
    "compensated_hlc",
    "first_ack_hlc",
    "charged_hlc",
    "receipt_hlc",
]
PHASE_WIDTH = 86  # "09:36:47.810": an HLC's time of day to the millisecond
NARROW = {
    "open": st.column_config.LinkColumn("open", display_text="open ↗", help="Open this turn", width=56),
    "tool_name": st.column_config.TextColumn("tool", width=94),
    "tier": st.column_config.TextColumn("tier", width=98),
    "status": st.column_config.TextColumn("status", width=76),
    "finding_kinds": st.column_config.TextColumn("findings", width=138),
    **{
        f"{phase}_hlc": st.column_config.TextColumn(
            phase.replace("_", " "), width=PHASE_WIDTH, help=f"HLC of {phase}"
        )
        for phase in ("dispatched", "committed", "compensated", "first_ack", "charged", "receipt")
    },
    "session_id": st.column_config.TextColumn("session", width="small"),
    "turn_id": st.column_config.TextColumn("turn", width="small"),
}
TIERS = ["read_only", "button_reversible", "soft_irreversible", "hard_irreversible"]
TILES = [  # the ledger's findings an SRE counts first, each a tile
    ("Unbilled", findings.UNBILLED_SIDE_EFFECT, "a billable call committed and was never charged"),
    ("Unapproved", findings.UNAPPROVED_SIDE_EFFECT, "committed without the approval it requires"),
    ("Duplicates", findings.DUPLICATE_COMMIT, "the third party executed one idempotency key twice"),
    ("Ghost commits", findings.GHOST_COMMIT, "the third party acted on a call the tool layer says did not"),
    ("Cut short", findings.INTERRUPTED_SIDE_EFFECT, "the stop ended the call unfinished: outcome unknown"),
]

st.title("Side effects")
st.caption("Every tool call with the HLC of each phase of its life, and the findings that name it.")
common.snapshot_caption()
top = st.columns([1, 4, 3])
with top[0]:
    range_key = filters.time_range()
with top[1]:
    kinds = filters.multiselect(
        "Only calls with finding",
        LEDGER_KINDS,
        param="kind",
        strict=True,
        placeholder="any call (pick kinds to narrow)",
    )
with top[2]:
    tiers = filters.multiselect("Tier", TIERS, param="tier", strict=True)
from_ms, to_ms = common.time_window(range_key)
ledger = data.query(
    "side_effects_ledger", from_ms=from_ms, to_ms=to_ms, kinds=kinds, tiers=tiers, limit=ROW_LIMIT
)

if not len(ledger):
    common.empty("No tool call matches.")
    st.stop()

counts = ledger["finding_kinds"].explode().value_counts()
tiles = st.columns(1 + len(TILES))
tiles[0].metric("Calls", f"{len(ledger):,}" + ("+" if len(ledger) >= ROW_LIMIT else ""), border=True)
for tile, (label, kind, meaning) in zip(tiles[1:], TILES, strict=True):
    tile.metric(label, int(counts.get(kind, 0)), border=True, help=f"`{kind}` findings: {meaning}.")

table = common.with_turn_links(ledger)


def _time_of_day(hlc: float | None) -> str:
    """`09:36:47.810`: the HLC's physical time of day; the caption gives the day, the turn's page the HLC."""
    if hlc is None or pd.isna(hlc):
        return ""
    return common.format_hlc(hlc)[11:23]  # 2026-01-01T09:36:47.810Z+3 → 09:36:47.810


for column in [c for c in table if c.endswith("_hlc")]:
    table[column] = table[column].map(_time_of_day)
table["finding_kinds"] = table["finding_kinds"].map(lambda kinds: ", ".join(kinds))
days = sorted({common.format_ms(ns / 1e6)[:10] for ns in ledger["started_ns"].dropna()})
head, toggle = st.columns([4, 1], vertical_alignment="bottom")
head.caption(
    f"Phase times are HLC times of day to the millisecond (UTC) on {', '.join(days[:3])}"
    f"{' …' if len(days) > 3 else ''}; a turn's page (open) gives each HLC in full · newest call first."
)
with toggle:
    everything = filters.toggle("All columns", param="all_columns")
leading = [c for c in LEADING_COLUMNS if c in table]
st.dataframe(
    table,
    column_order=leading + ([c for c in table if c not in LEADING_COLUMNS] if everything else []),
    hide_index=True,
    width="stretch",
    height=min(38 + 35 * len(table), 700),
    column_config=NARROW,
)
