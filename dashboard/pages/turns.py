"""Turns: find the turn an incident is about (by time, session, status, finding, tool, tier) and open it."""

from __future__ import annotations

import streamlit as st
from turnlens.dashboard import common, data, filters
from turnlens.kernel import contract, findings

ROW_LIMIT = 2000

st.title("Turns")
common.snapshot_caption()
tools_seen = data.query("filter_options")["value"].tolist()
# The `turns` and `divergences` views document these values; listing them here spares a full scan.
STATUSES = list(findings.TURN_STATUSES)
FINDING_KINDS = list(findings.FINDING_KINDS)

row1 = st.columns([1, 2, 2, 3])
with row1[0]:
    range_key = filters.time_range()
with row1[1]:
    session = filters.text_input("Session", param="session", placeholder="session id (or part of it)")
with row1[2]:
    statuses = filters.multiselect("Status", STATUSES, param="status")
with row1[3]:
    kinds = filters.multiselect("Finding kind", FINDING_KINDS, param="kind")
row2 = st.columns([3, 3, 2])
with row2[0]:
    tools = filters.multiselect("Tool", tools_seen, param="tool")
with row2[1]:
    tiers = filters.multiselect("Tier", list(contract.TIERS), param="tier")

from_ms, to_ms = common.time_window(range_key)
turns = data.query(
    "turns_list",
    from_ms=from_ms,
    to_ms=to_ms,
    session=session,
    statuses=statuses,
    kinds=kinds,
    tools=tools,
    tiers=tiers,
    limit=ROW_LIMIT,
)
with row2[2]:
    st.metric("Matching turns", f"{len(turns):,}" + ("+" if len(turns) >= ROW_LIMIT else ""))

if not len(turns):
    common.empty("No turn matches these filters.")
    st.stop()

st.caption(
    f"{common.describe_window((from_ms, to_ms))} · newest first · select a row (or its ↗ link) to open it."
)
table = common.with_turn_links(turns)
event = st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    height=min(38 + 35 * len(table), 640),
    on_select="rerun",
    selection_mode="single-row",
    key="turns_table",
    column_config={
        "open": common.turn_link_column(),
        "started_at": st.column_config.DatetimeColumn("started (UTC)", format="YYYY-MM-DD HH:mm:ss.SSS"),
        "duration_ms": st.column_config.NumberColumn("duration", format="%.0f ms"),
        "findings": st.column_config.NumberColumn("findings", help="rows of `divergences` for this turn"),
    },
)
selected = event.selection.rows if event is not None else []
if selected:
    row = turns.iloc[selected[0]]
    st.switch_page(
        "pages/turn_detail.py", query_params={"session": row["session_id"], "turn": row["turn_id"]}
    )
