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
    statuses = filters.multiselect("Status", STATUSES, param="status", strict=True)
with row1[3]:
    kinds = filters.multiselect("Finding kind", FINDING_KINDS, param="kind", strict=True)
row2 = st.columns([3, 3, 2])
with row2[0]:
    tools = filters.multiselect("Tool", tools_seen, param="tool")
with row2[1]:
    tiers = filters.multiselect("Tier", list(contract.TIERS), param="tier", strict=True)

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
    f"{common.describe_window((from_ms, to_ms))} · newest first · select a row or click its turn to open it."
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
    column_order=[
        "open",
        "started_at",
        "session_id",
        "status",
        "findings",
        "finding_kinds",
        "tools",
        "evidence",
        "duration_ms",
        "cancel_origin",
        "tool_calls",
        "tokens_streamed",
    ],
    column_config={
        # the turn id is the link to the turn: one column, the width of an id
        "open": st.column_config.LinkColumn(
            "turn", display_text=r"turn=([^&]+)", help="Open this turn", width=135
        ),
        "started_at": st.column_config.DatetimeColumn(
            "started (UTC)", format="MM-DD HH:mm:ss", width=100
        ),
        "session_id": st.column_config.TextColumn("session", width=160),
        "status": st.column_config.TextColumn("status", width=80),
        "findings": st.column_config.NumberColumn(
            "findings", help="rows of `divergences` for this turn", width=60
        ),
        "finding_kinds": st.column_config.ListColumn("finding kinds", width=180),
        "tools": st.column_config.ListColumn("tools", width=110),
        "evidence": st.column_config.TextColumn("evidence", width="large", help="what the detectors saw"),
        "duration_ms": st.column_config.NumberColumn("duration", format="%.0f ms", width=80),
        "cancel_origin": st.column_config.TextColumn("cancel", width=90),
        "tool_calls": st.column_config.NumberColumn("calls", width=50),
        "tokens_streamed": st.column_config.NumberColumn("tokens", width=60),
    },
)
selected = event.selection.rows if event is not None else []
if selected:
    row = turns.iloc[selected[0]]
    st.switch_page(
        "pages/turn_detail.py", query_params={"session": row["session_id"], "turn": row["turn_id"]}
    )
