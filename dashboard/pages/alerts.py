"""Alerts: the rules `turnlens alerts run` evaluates, what is firing now, and what fired before."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from turnlens.alerts import alerting
from turnlens.dashboard import common, data
from turnlens.kernel import durations

st.title("Alerts")
state = data.alert_state()
st.caption(
    f"State kept in `{data.settings().store_dir / alerting.STATE_FOLDER}` by `turnlens alerts run`"
    + (
        f"; last evaluation {state.evaluated_at}."
        if state.evaluated_at
        else "; it has not run on this store yet."
    )
)

current = data.alerts_frame(list(state.alerts.values()))
tiles = st.columns(4)
for tile, (label, mask) in zip(
    tiles,
    [
        ("Firing · critical", lambda f: (f["state"] == "firing") & (f["severity"] == "critical")),
        ("Firing · warning", lambda f: (f["state"] == "firing") & (f["severity"] == "warning")),
        ("Pending", lambda f: f["state"] == "pending"),
        ("Resolved (recent)", lambda f: f["state"] == "resolved"),
    ],
    strict=True,
):
    tile.metric(label, int(mask(current).sum()) if len(current) else 0, border=True)

st.subheader("Current state")
if len(current):
    shown = current.copy()
    has_turn = shown["session_id"].notna() & shown["turn_id"].notna()
    shown["open"] = [
        common.turn_url(s, t) if ok else None
        for s, t, ok in zip(shown["session_id"], shown["turn_id"], has_turn, strict=True)
    ]
    st.dataframe(
        shown.drop(columns=["session_id", "turn_id"]),
        hide_index=True,
        width="stretch",
        column_config={"open": common.turn_link_column()},
    )
else:
    common.empty("No alert is pending, firing or recently resolved.")

st.subheader("Rules")
try:
    rules = alerting.load_rules()
except alerting.RuleError as exc:
    st.error(f"The rule files are broken: {exc}")
    rules = []
firing_by_rule = (
    current[current["state"] == "firing"].groupby("alert").size() if len(current) else pd.Series()
)
for rule in rules:
    firing = int(firing_by_rule.get(rule.name, 0))
    badge = f":red-badge[{firing} firing]" if firing else ":green-badge[ok]"
    labels = " ".join(f"`{k}={v}`" for k, v in rule.labels.items())
    with st.expander(
        f"**{rule.name}** · {rule.severity} · for {durations.format_duration(rule.for_)} {badge}"
    ):
        st.markdown(f"{rule.summary}  \n{labels}")
        st.caption(rule.description)
        st.markdown("**Runbook**")
        st.markdown(rule.runbook)
        st.code(rule.sql, language="sql")

st.subheader("History")
history = data.alert_history()
if len(history):
    first = ["status", "labels.alertname", "labels.severity", "startsAt", "endsAt", "annotations.summary"]
    st.dataframe(
        history,
        hide_index=True,
        width="stretch",
        column_order=[c for c in first if c in history] + [c for c in history if c not in first],
    )
else:
    common.empty("No alert has fired or resolved in this store yet.")
