"""Overview: are cancels being honoured right now? The SLO tiles, findings over time, alerts firing."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from turnlens.dashboard import charts, common, data, filters
from turnlens.kernel import findings as finding_kinds

P99_PAGE_MS = finding_kinds.CANCEL_TO_ACK_P99_PAGE_MS
TURNS_PAGE = "pages/turns.py"
TURN_PAGE = "pages/turn_detail.py"
SLO_TABS = ["P95 and P99", "Burn rate"]  # drawn one at a time: the page's charts are most of its cost

st.title("Overview")
left, right = st.columns([1, 3], vertical_alignment="bottom")
with left:
    range_key = filters.time_range()
window = common.time_window(range_key)
with right:
    st.caption(f"Showing {common.describe_window(window)}.")
    common.as_of_caption()
    common.snapshot_caption()
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


thresholds = data.query("dashboard_settings")
objective_ms = _value(thresholds, "slo_cancel_to_ack_ms") or 100.0
partial_target = _value(thresholds, "partial_store_target") or 0.05
tolerance = _value(thresholds, "skew_tolerance_ms") or 100.0

counts = data.query("overview_counts", from_ms=from_ms, to_ms=to_ms)
slo = data.query("overview_cancel_slo", from_ms=from_ms, to_ms=to_ms)
skew = data.query("overview_skew", from_ms=from_ms, to_ms=to_ms)
partial = data.query("overview_partial_store", from_ms=from_ms, to_ms=to_ms)
p95, p99 = _value(slo, "p95_ms"), _value(slo, "p99_ms")
max_skew = float(skew["max_skew_ms"].max()) if len(skew) else None
rate = _value(partial, "hit_rate")

bounds = data.query("store_bounds")
span_ms = (to_ms - from_ms) if from_ms is not None and to_ms is not None else None
if span_ms is None and len(bounds) and pd.notna(bounds["newest_ms"].iloc[0]):
    span_ms = int(bounds["newest_ms"].iloc[0] - bounds["oldest_ms"].iloc[0])
bar_ms = int((span_ms or 3_600_000) / 60)  # about 60 bars across the window
# whole minutes once a bar is a minute or more: those add up the per-minute counts (finding_minutes)
bucket_ms = bar_ms // 60_000 * 60_000 if bar_ms >= 60_000 else max(1000, bar_ms // 1000 * 1000)
findings = data.query("findings_by_kind", from_ms=from_ms, to_ms=to_ms, bucket_ms=bucket_ms)


def _quarantine_notice() -> None:
    """Says so when segments were moved aside as unreadable: their spans are missing from every view."""
    try:
        moved = data.query("quarantined_segments")
    except data.StoreNotReady:  # a catalog written before the view existed
        return
    if len(moved):
        st.warning(
            f"{len(moved)} unreadable segment file(s) quarantined (newest: `{moved['segment'].iloc[0]}`, "
            f"{moved['reason'].iloc[0]}). Their spans are missing from every view; the files are kept under "
            "`quarantine/` in the store folder. List them with `select * from quarantined_segments`.",
            icon=":material/report:",
        )


_quarantine_notice()  # after the queries above: one of them may have been the reader that found the file

slo_tiles = st.columns(4)
slo_tiles[0].metric(
    "Cancel → ack P95",
    "—" if p95 is None else f"{p95:.0f} ms",
    _vs(p95, objective_ms),
    delta_color="inverse",
    border=True,
    help=f"Objective: P95 under {objective_ms:g} ms (a P2 alert when over it for 5 minutes).",
)
slo_tiles[1].metric(
    "Cancel → ack P99",
    "—" if p99 is None else f"{p99:.0f} ms",
    _vs(p99, P99_PAGE_MS),
    delta_color="inverse",
    border=True,
    help="Pages (P1) when P99 is over 500 ms for 1 minute.",
)
slo_tiles[2].metric(
    "Max HLC skew",
    "—" if max_skew is None else f"{max_skew:.0f} ms",
    _vs(max_skew, tolerance),
    delta_color="inverse",
    border=True,
    help="Largest |HLC − wall clock| of any node, against the skew tolerance of the `settings` view.",
)
slo_tiles[3].metric(
    "Partial-store hit rate",
    "—" if rate is None else f"{rate:.1%}",
    None if rate is None else f"{(rate - partial_target) * 100:+.1f} pp vs {partial_target:.0%}",
    delta_color="inverse",
    border=True,
    help="Tool calls that had to store a partial result.",
)
count_tiles = st.columns(4)
count_tiles[0].metric("Turns", f"{int(_value(counts, 'turns') or 0):,}", border=True)
count_tiles[1].metric("Cancels", f"{int(_value(counts, 'cancels') or 0):,}", border=True)
count_tiles[2].metric(
    "Cancels never acknowledged",
    f"{int(_value(slo, 'cancels_never_acked') or 0):,}",
    border=True,
    help="A cancel no layer acknowledged: the stop may not have stopped anything.",
)
count_tiles[3].metric("Findings", f"{int(findings['findings'].sum()):,}", border=True)
# Every count opens the turns behind it, in this time range.
for tile, (label, params) in zip(
    count_tiles,
    [
        ("Open the turns", {}),
        ("Open the cancelled", {"status": "cancelled"}),
        ("Open the unpropagated", {"kind": finding_kinds.CANCEL_NOT_PROPAGATED}),
        ("Open committed despite stop", {"kind": finding_kinds.CANCELLED_BUT_COMMITTED}),
    ],
    strict=True,
):
    with tile:
        st.page_link(
            TURNS_PAGE,
            label=label,
            icon=":material/arrow_forward:",
            query_params={**params, **filters.range_params()},
        )

st.subheader("Alerts firing now")
state = data.alert_state()
firing = data.alerts_frame([a for a in state.alerts.values() if a.state in ("firing", "pending")])
if not len(firing):
    st.success(
        "Nothing firing."
        + (
            f" Rules last evaluated at {state.evaluated_at}."
            if state.evaluated_at
            else " `turnlens alerts run` has not evaluated this store yet."
        ),
        icon=":material/check_circle:",
    )
else:
    st.caption(f"Rules last evaluated at {state.evaluated_at}; one row per alert, `count` the rows behind it")
    st.dataframe(
        firing[["state", "severity", "alert", "count", "summary", "labels", "active since"]],
        hide_index=True,
        width="stretch",
    )

st.subheader("Cancel-to-ack SLO")
slo_size = "5m" if span_ms is not None and span_ms <= 6 * 3_600_000 else "1h"
windows = data.query("overview_slo_windows", from_ms=from_ms, to_ms=to_ms, window_size=slo_size)
if len(windows):
    worst = windows.loc[windows["burn_rate"].idxmax()]
    st.caption(
        f"Per {slo_size} window · error-budget burn rate, worst: {worst['burn_rate']:.0f} from "
        f"{worst['window_start']:%H:%M} (P95 {worst['p95_ms']:.0f} ms)"
    )
    shown, tab = common.lazy_tabs(SLO_TABS, key="slo_tab")
    with tab:
        if shown == SLO_TABS[0]:
            st.caption(
                "P95 and P99 against the objective and the paging threshold · drag across it to show only "
                "that stretch on every page"
            )
            brushed = common.draw_chart(
                charts.slo_latency(windows, objective_ms=objective_ms, page_ms=P99_PAGE_MS),
                height=300,
                on_select="rerun",
                selection_mode=["brush"],
                key="slo_brush",
            )
            stretch = (brushed.selection.get("brush") or {}).get("window_start") if brushed else None
            if stretch:
                filters.set_custom_range(*stretch)  # every page then shows that stretch
        else:
            st.caption("1: the budget is spent exactly over the period; red: a fast burn")
            common.show_chart(charts.slo_burn_rate(windows), room=70)
else:
    common.empty("No cancels in this window, so no SLO windows.")

findings_col, more_col = st.columns(2)
with findings_col:
    st.subheader("Findings by kind")
    if len(findings):
        ranked = charts.findings_ranked(findings)
        picked = common.draw_chart(
            ranked,
            height=(common.chart_height(ranked) or 260) + 50,
            on_select="rerun",
            selection_mode=["kind"],
            key="findings_by_kind",
        )
        st.caption("Click a bar for the turns with that finding.")
        kinds = picked.selection.get("kind") if picked is not None else None
        if kinds:
            st.switch_page(TURNS_PAGE, query_params={"kind": kinds[0]["kind"], **filters.range_params()})
    else:
        common.empty("No findings in this window.")
with more_col:
    st.subheader("Cancel → ack latency")
    latencies = data.query("cancel_latencies", from_ms=from_ms, to_ms=to_ms)
    if len(latencies):
        late = int((latencies["cancel_to_ack_ms"] > objective_ms).sum())
        st.caption(
            f"{len(latencies):,} cancelled turns in this window, {late:,} of them acknowledged after more "
            f"than the {objective_ms:g} ms objective."
        )
        points = common.lazy_expander(
            "Each cancelled turn (click a point to open it)",
            icon=":material/scatter_plot:",
            key="latency_points",
        )
        if points is not None:
            with points:
                picked = common.draw_chart(
                    charts.cancel_latency(latencies, objective_ms=objective_ms, page_ms=P99_PAGE_MS),
                    height=320,
                    on_select="rerun",
                    selection_mode=["turn"],
                    key="cancel_latency",
                )
                turns = picked.selection.get("turn") if picked is not None else None
                if turns:
                    st.switch_page(
                        TURN_PAGE,
                        query_params={"session": turns[0]["session_id"], "turn": turns[0]["turn_id"]},
                    )
    else:
        common.empty("No cancels in this window.")

    st.subheader("HLC skew by node")
    if len(skew):
        over = int((skew["max_skew_ms"] > tolerance).sum())
        st.caption(f"{over} of {len(skew)} nodes over the skew tolerance of {tolerance:g} ms.")
        bars = common.lazy_expander("Skew of each node", icon=":material/bar_chart:", key="skew_by_node")
        if bars is not None:
            with bars:
                common.show_chart(
                    charts.skew_by_node(
                        skew[["node", "max_skew_ms", "p95_skew_ms", "events"]], tolerance_ms=tolerance
                    )
                )
    else:
        common.empty("No events with an HLC in this window.")
