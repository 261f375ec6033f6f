"""Tools: the registry audit: declared tier and dispatch beside what was observed, and untiered tools."""

from __future__ import annotations

import streamlit as st
from turnlens.dashboard import common, data

st.title("Tools")
st.caption(
    "The SRE team's registry (`DIR/tool_registry.toml`) joined with what the spans show. "
    "A tool without a tier is treated as eager and irreversible."
)
audit = data.query("tools_audit")
if not len(audit):
    common.empty("No tools seen and none registered.")
    st.stop()

flags = [c for c in audit.columns if audit[c].dtype == bool]
tiles = st.columns(1 + len(flags[:5]))
tiles[0].metric("Tools", len(audit), border=True)
for tile, flag in zip(tiles[1:], flags[:5], strict=False):
    tile.metric(flag.replace("_", " "), int(audit[flag].sum()), border=True)


def _highlight(row):  # noqa: ANN001, ANN202 - pandas Styler callback
    bad = any(
        bool(row[f])
        for f in flags
        if f.startswith(
            ("seen_without", "seen_dispatched_eager", "unregistered", "tier_mismatch", "dispatch_mismatch")
        )
    )
    return ["background-color: #fdecea" if bad else "" for _ in row]


st.dataframe(audit.style.apply(_highlight, axis=1), hide_index=True, width="stretch")
