"""Overview: are cancels being honoured right now? The SLO tiles, findings over time, alerts firing."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from turnlens.dashboard import charts, common, data, filters

P95_OBJECTIVE_MS = 100.0  # DESIGN.md: cancel_to_ack_latency_ms P95 < 100 ms
P99_PAGE_MS = 500.0  # P1 when P99 > 500 ms
PARTIAL_STORE_OBJECTIVE = 0.05  # partial_store_hit_rate < 5 %
DEFAULT_SKEW_TOLERANCE_MS = 100.0

st.title("Overview")
left, right = st.columns([1, 3])
with left:
    range_key = filters.time_range()
window = common.time_window(range_key)
with right:
    st.caption(f"Showing {common.describe_window(window)}.")
from_ms, to_ms = window


def _value(frame: pd.DataFrame, column: str) -> float | None:
    if column not in frame or not len(frame):
        return None
    value = frame[column].iloc[0]
    return None if pd.isna(value) else float(value)


def _vs(value: float | None, limit: float, unit: str = " ms") -> str | None:
    if value is None:
        return None
    return f"{value - limit:+.0f}{unit} vs {limit:.0f}{unit}"


counts = data.query("overview_counts", from_ms=from_ms, to_ms=to_ms)
slo = data.query("overview_cancel_slo", from_ms=from_ms, to_ms=to_ms)
skew = data.query("overview_skew", from_ms=from_ms, to_ms=to_ms)
partial = data.query("overview_partial_store", from_ms=from_ms, to_ms=to_ms)

p95, p99 = _value(slo, "p95_ms"), _value(slo, "p99_ms")
max_skew = float(skew["max_skew_ms"].max()) if len(skew) else None
tolerance = (
    float(skew["tolerance_ms"].max())
    if len(skew) and skew["tolerance_ms"].notna().any()
    else (DEFAULT_SKEW_TOLERANCE_MS)
)
rate = _value(partial, "hit_rate")

tiles = st.columns(6)
tiles[0].metric(
    "Cancel → ack P95",
    "—" if p95 is None else f"{p95:.0f} ms",
    _vs(p95, P95_OBJECTIVE_MS),
    delta_color="inverse",
    border=True,
    help="Objective: P95 under 100 ms (P2 alert over 5 minutes).",
)
tiles[1].metric(
    "Cancel → ack P99",
    "—" if p99 is None else f"{p99:.0f} ms",
    _vs(p99, P99_PAGE_MS),
    delta_color="inverse",
    border=True,
    help="Pages (P1) when P99 is over 500 ms for 1 minute.",
)
tiles[2].metric(
    "Max HLC skew",
    "—" if max_skew is None else f"{max_skew:.0f} ms",
    _vs(max_skew, tolerance),
    delta_color="inverse",
    border=True,
    help="Largest |HLC − wall clock| of any node, against the tolerance.",
)
tiles[3].metric(
    "Partial-store hit rate",
    "—" if rate is None else f"{rate:.1%}",
    None if rate is None else f"{(rate - PARTIAL_STORE_OBJECTIVE) * 100:+.1f} pp vs 5 %",
    delta_color="inverse",
    border=True,
    help="partial.stored per tool call; the objective is under 5 %.",
)
tiles[4].metric("Turns", f"{int(_value(counts, 'turns') or 0):,}", border=True)
tiles[5].metric(
    "Cancels",
    f"{int(_value(counts, 'cancels') or 0):,}",
    f"{int(_value(slo, 'cancels_never_acked') or 0)} never acknowledged",
    delta_color="off",
    border=True,
)

st.subheader("Alerts firing now")
state = data.alert_state()
firing = data.alerts_frame([a for a in state.alerts.values() if a.state in ("firing", "pending")])
if not len(firing):
    st.success(
        "Nothing firing."
        + (
            f" Rules last evaluated {state.evaluated_at}."
            if state.evaluated_at
            else " `turnlens alerts run` has not evaluated this store yet."
        ),
        icon=":material/check_circle:",
    )
else:
    st.dataframe(
        firing[["state", "severity", "alert", "summary", "labels", "active since"]],
        hide_index=True,
        width="stretch",
    )

findings_col, latency_col = st.columns(2)
with findings_col:
    st.subheader("Findings by kind")
    span_ms = (to_ms - from_ms) if from_ms is not None and to_ms is not None else None
    bounds = data.query("store_bounds")
    if span_ms is None and len(bounds) and pd.notna(bounds["newest_ms"].iloc[0]):
        span_ms = int(bounds["newest_ms"].iloc[0] - bounds["oldest_ms"].iloc[0])
    bucket_ms = max(1000, int((span_ms or 3_600_000) / 60) // 1000 * 1000)
    findings = data.query("findings_by_kind", from_ms=from_ms, to_ms=to_ms, bucket_ms=bucket_ms)
    if len(findings):
        st.altair_chart(charts.findings_over_time(findings), width="stretch")
    else:
        common.empty("No findings in this window.")
with latency_col:
    st.subheader("Cancel → ack latency")
    latencies = data.query("cancel_latencies", from_ms=from_ms, to_ms=to_ms)
    if len(latencies):
        st.altair_chart(
            charts.cancel_latency(latencies, objective_ms=P95_OBJECTIVE_MS, page_ms=P99_PAGE_MS),
            width="stretch",
        )
    else:
        common.empty("No cancels in this window.")

st.subheader("HLC skew by node")
if len(skew):
    st.altair_chart(
        charts.skew_by_node(skew[["node", "max_skew_ms", "p95_skew_ms", "events"]], tolerance_ms=tolerance),
        width="stretch",
    )
else:
    common.empty("No events with an HLC in this window.")
