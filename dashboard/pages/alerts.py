"""Alerts: the rules `turnlens alerts run` evaluates, what is firing now, and what fired before.

One row per alert, as the runner keeps them: a grouped rule's alert stands for all its rows (its count),
shows the worst few and opens the worst turn. The page says when the rules were evaluated and where the
dashboard's windows end, and offers to line them up when they differ.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st
from turnlens.alerts import asof
from turnlens.alerts import rules as alert_rules
from turnlens.alerts import state as alert_state
from turnlens.dashboard import common, data, filters
from turnlens.kernel import durations

AGREE_MS = 60_000  # the rules' evaluation and the dashboard's as-of further apart than this are pointed out

st.title("Alerts")
state = data.alert_state()
st.caption(
    f"State kept in `{data.settings().store_dir / alert_state.STATE_FOLDER}` by `turnlens alerts run`"
    + (
        f"; rules last evaluated at {state.evaluated_at} (as of {asof.describe(state.as_of or asof.NOW)})."
        if state.evaluated_at
        else "; it has not run on this store yet."
    )
)
common.as_of_caption()
dashboard_ms = common.as_of_ms()
if state.evaluated_at and dashboard_ms is not None:
    evaluated_ms = int(durations.parse_time(state.evaluated_at).timestamp() * 1000)
    if abs(evaluated_ms - dashboard_ms) > AGREE_MS:
        gap_s = abs(evaluated_ms - dashboard_ms) / 1000
        apart = f"{gap_s / 86400:.1f} days" if gap_s >= 86400 else f"{gap_s / 60:.0f} min"
        side = "before" if evaluated_ms < dashboard_ms else "after"
        st.warning(
            f"The rules were evaluated {apart} {side} the time the dashboard's windows end at, so its charts "
            "and these alerts describe different moments. Show the dashboard as of the evaluation, or "
            f"evaluate the rules as of the dashboard (`turnlens alerts run --at {filters.as_of()}`; "
            "a recorded store: `--at newest`).",
            icon=":material/schedule:",
        )
        st.page_link(
            "pages/overview.py",
            label=f"Show the dashboard as of {state.evaluated_at}",
            icon=":material/arrow_forward:",
            query_params={filters.AS_OF: state.evaluated_at},
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
        column_order=["state", "severity", "alert", "count", "summary", "open", "labels", "examples"]
        + ["active since", "fired at", "resolved at"],
        column_config={
            "open": common.turn_link_column(),
            "count": st.column_config.NumberColumn("count", help="Rows of the rule this alert stands for"),
            "examples": st.column_config.TextColumn("worst examples", width="large"),
        },
    )
    st.caption(
        "A grouped rule pages once per group (its group_by labels), however many rows it has: `count` says "
        "how many, `open` opens the worst turn."
    )
else:
    common.empty("No alert is pending, firing or recently resolved.")

st.subheader("Rules")
try:
    rules = alert_rules.load_rules()
except alert_rules.RuleError as exc:
    st.error(f"The rule files are broken: {exc}")
    rules = []
firing_by_rule = (
    current[current["state"] == "firing"].groupby("alert").size() if len(current) else pd.Series()
)
for rule in rules:
    firing = int(firing_by_rule.get(rule.name, 0))
    badge = f":red-badge[{firing} firing]" if firing else ":green-badge[ok]"
    labels = " ".join(f"`{k}={v}`" for k, v in rule.labels.items())
    if rule.group_by is not None:
        labels += " · one alert per " + (", ".join(f"`{c}`" for c in rule.group_by) or "rule")
    opened = common.lazy_expander(
        f"**{rule.name}** · {rule.severity} · for {durations.format_duration(rule.for_)} {badge}",
        key=f"rule_{rule.name}",
    )
    if opened is None:
        continue
    with opened:
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
