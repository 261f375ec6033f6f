"""Tools: the registry audit: declared tier and dispatch beside what was observed, and untiered tools."""

from __future__ import annotations

import streamlit as st
from turnlens.dashboard import common, data

VERDICT_COLOURS = {
    "ok": "",
    "unused": "background-color: #f3f3f3",
    "mismatch": "background-color: #fff4e5",
    "unregistered": "background-color: #fff4e5",
    "untiered": "background-color: #fdecea",
}

st.title("Tools")
st.caption(
    "The SRE team's registry (`DIR/tool_registry.toml`) beside what the spans show. "
    "A tool with no tier anywhere is treated as eager and irreversible."
)
audit = data.query("tools_audit")
# Untiered and unregistered tools first: they are what the audit is for.
audit = audit.sort_values(
    "verdict", key=lambda v: v.map({"untiered": 0, "unregistered": 1, "mismatch": 2}).fillna(3), kind="stable"
)
if not len(audit):
    common.empty("No tools seen and none registered.")
    st.stop()

verdicts = audit["verdict"].value_counts()
tiles = st.columns(6)
tiles[0].metric("Tools", len(audit), border=True)
for tile, verdict in zip(tiles[1:5], ["untiered", "unregistered", "mismatch", "unused"], strict=True):
    tile.metric(verdict, int(verdicts.get(verdict, 0)), border=True)
tiles[5].metric(
    "Eager side effects",
    int(audit["eager_side_effects"].fillna(0).sum()),
    border=True,
    help="eager_side_effect findings: an irreversible call dispatched while its stream still ran",
)

st.dataframe(
    audit.style.apply(lambda row: [VERDICT_COLOURS.get(row["verdict"], "")] * len(row), axis=1),
    hide_index=True,
    width="stretch",
    column_order=["verdict", *[c for c in audit.columns if c != "verdict"]],
    height=38 + 35 * len(audit),  # every tool: the one an SRE looks for is often the untiered one at the end
)
