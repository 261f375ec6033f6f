"""One turn's timeline as an Altair chart: a lane per layer, the stop and the commits marked on it.

The incident export draws it as static SVG and the dashboard's Turn detail keeps it beside its
waterfall, so both read a turn the same way; it lives here, upstream of the dashboard.
"""

from __future__ import annotations

from typing import Literal

import altair as alt
import numpy as np
import pandas as pd
from turnlens.kernel import contract

LANES = [*contract.LAYERS, "unknown"]
# Drawn as SVG in the dashboard (Vega's default is a canvas): labels, times and marks are part of the page,
# readable by screen readers and by the browser tests; these charts hold hundreds of marks, not thousands.
SVG = {"embedOptions": {"renderer": "svg"}}

# What a mark on the swimlane is; the order is the legend's.
CANCEL = "cancel requested"
COMMIT_AFTER_STOP = "committed after the stop"
COMMIT = "committed"
CANCEL_STEP = "cancel received / acked"
COMPENSATION = "compensated / discarded"
FAILURE = "failed"
OTHER = "other event"
MARK_KINDS = [CANCEL, COMMIT_AFTER_STOP, COMMIT, CANCEL_STEP, COMPENSATION, FAILURE, OTHER]
MARK_COLORS = ["#d62728", "#b10dc9", "#ff7f0e", "#e377c2", "#2ca02c", "#8c564b", "#7f7f7f"]
MARK_SHAPES = ["triangle-down", "diamond", "diamond", "triangle-up", "square", "cross", "circle"]

_COMMITS = {contract.EV_TOOL_COMMITTED, contract.EV_THIRD_PARTY_ACK}
_CANCEL_STEPS = {contract.EV_CANCEL_RECEIVED, contract.EV_CANCEL_ACKNOWLEDGED}
_UNDO = {contract.EV_TOOL_COMPENSATED, contract.EV_TOOL_DISCARDED}
_FAILURES = {contract.EV_TOOL_FAILED, contract.EV_TOOL_COMPENSATION_FAILED}
_WALL_CLOCK_RESOLUTION_NS = 1_000_000  # clock_resolution_ms: an inversion is a contradiction beyond 1 ms


def _hlc_ms(hlc: pd.Series) -> pd.Series:
    return (hlc.astype("Int64") // (1 << contract.HLC_LOGICAL_BITS)).astype("Float64")


def timeline_frame(events: pd.DataFrame, *, order: Literal["hlc", "wall_clock"] = "hlc") -> pd.DataFrame:
    """The swimlane's rows: `turn_timeline` rows plus position, mark kind and the inversion flag.

    Needs the columns `name`, `layer`, `hlc` and `wall_ns`; uses `step`, `order_hlc`, `node`,
    `tool_name`, `span_name` when present (the columns of `turn_timeline`). Events without an HLC are
    placed by wall clock in either order.
    """
    frame = events.copy().reset_index(drop=True)
    for column in ("node", "tool_name", "span_name", "step"):
        if column not in frame:
            frame[column] = None
    if "order_hlc" in frame:  # turn_events derives an HLC for rows that carry none; sort on it like the views
        frame["hlc"] = frame["order_hlc"].where(frame["order_hlc"].notna(), frame["hlc"])
    frame["event"] = frame["step"].where(frame["step"].notna(), frame["name"])
    frame["lane"] = frame["layer"].where(frame["layer"].isin(contract.LAYERS), "unknown")
    wall_ms = frame["wall_ns"].astype("Float64") / 1e6
    hlc_ms = _hlc_ms(frame["hlc"]).fillna(wall_ms)
    position = hlc_ms if order == "hlc" else wall_ms
    frame["t_ms"] = (position - position.min()).astype(float)
    frame["at_ms"] = position.astype(float)  # Unix ms on the same axis: the HLC (or wall clock) as a time
    frame["hlc_physical_ms"] = hlc_ms
    frame["hlc_logical"] = (frame["hlc"].astype("Int64") % (1 << contract.HLC_LOGICAL_BITS)).astype("Int64")
    frame["wall_utc"] = pd.to_datetime(frame["wall_ns"], unit="ns", utc=True).dt.strftime("%H:%M:%S.%f")

    # Inversions: an event whose wall clock is earlier, beyond the resolution, than an event before it by HLC.
    by_hlc = frame.assign(_key=frame["hlc"].astype("Float64").fillna(frame["wall_ns"].astype("Float64")))
    by_hlc = by_hlc.sort_values(["_key", "wall_ns"], kind="stable")
    previous_max = by_hlc["wall_ns"].astype("float64").cummax().shift(1)
    inverted = (previous_max - by_hlc["wall_ns"].astype("float64")) > _WALL_CLOCK_RESOLUTION_NS
    frame["inverted"] = inverted.reindex(frame.index).fillna(False).astype(bool)
    frame["order_in_hlc"] = pd.Series(np.arange(1, len(by_hlc) + 1), index=by_hlc.index).reindex(frame.index)

    cancels = frame.loc[frame["event"] == contract.EV_CANCEL_REQUESTED, "hlc_physical_ms"]
    first_cancel = cancels.min() if len(cancels) else None
    kinds = []
    for name, at in zip(frame["event"], frame["hlc_physical_ms"], strict=True):
        if name == contract.EV_CANCEL_REQUESTED:
            kinds.append(CANCEL)
        elif name in _COMMITS:
            late = first_cancel is not None and pd.notna(at) and at > first_cancel
            kinds.append(COMMIT_AFTER_STOP if late else COMMIT)
        elif name in _CANCEL_STEPS:
            kinds.append(CANCEL_STEP)
        elif name in _UNDO:
            kinds.append(COMPENSATION)
        elif name in _FAILURES:
            kinds.append(FAILURE)
        else:
            kinds.append(OTHER)
    frame["mark"] = kinds
    source = frame["source"] if "source" in frame else pd.Series("event", index=frame.index)
    frame["is_span_edge"] = source.isin(["span_start", "span_end"]).to_numpy()
    return frame


def swimlane_height(events: pd.DataFrame) -> int:
    """The swimlane's plot height in pixels: 46 a lane (callers that size the frame need it too)."""
    lanes = {lane for lane in events["layer"]} if len(events) else set()
    return max(140, 46 * len(lanes))


_ACTION_PREFIXES = ("tool.", "cancel.", "third_party.", "approval.", "billing.", "transcript.", "partial.")


def action_window(frame: pd.DataFrame) -> tuple[float, float] | None:
    """The stretch of a turn where tool calls and the cancel happen (`t_ms` of timeline_frame), padded;
    None when the turn has neither or they already span most of it."""
    action = frame.loc[frame["event"].fillna("").str.startswith(_ACTION_PREFIXES), "t_ms"]
    if action.empty:
        return None
    start, end, whole = float(action.min()), float(action.max()), float(frame["t_ms"].max())
    pad = max(50.0, (end - start) * 0.08)
    if whole <= 0 or (end - start + 2 * pad) > 0.6 * whole:
        return None
    return max(0.0, start - pad), min(whole, end + pad)


def swimlane(
    events: pd.DataFrame,
    *,
    order: Literal["hlc", "wall_clock"] = "hlc",
    width: int | str = "container",
    window: tuple[float, float] | None = None,
) -> alt.LayerChart:
    """One lane per layer, events placed by HLC (or wall clock), the stop and every commit marked.

    A red rule marks the first `cancel.requested`; commits after it are purple diamonds, so
    "committed after the stop" reads at a glance; events whose wall clock contradicts their HLC
    order carry a black ring. `window` (ms since the turn's first event) shows only that stretch;
    `action_window` gives the one around the tool calls and the stop.
    """
    frame = timeline_frame(events, order=order)
    frame = frame[frame["event"] != contract.EV_STREAM_PROGRESS]  # the token line tells that story
    axis_title = "ms since the turn's first event, by " + ("HLC" if order == "hlc" else "wall clock")
    lanes = [lane for lane in LANES if lane in set(frame["lane"])] or LANES
    if window is not None:
        frame = frame[(frame["t_ms"] >= window[0]) & (frame["t_ms"] <= window[1])]
        axis_title += f" (showing {window[0]:,.0f}–{window[1]:,.0f} ms)"
    x_scale = alt.Scale(domain=list(window), zero=False) if window else alt.Scale(zero=False)
    x = alt.X("t_ms:Q", title=axis_title, scale=x_scale)
    y = alt.Y("lane:N", sort=lanes, title=None, axis=alt.Axis(labelFontSize=13, labelFontWeight="bold"))
    tooltip = [
        alt.Tooltip("event:N", title="event"),
        alt.Tooltip("lane:N", title="layer"),
        alt.Tooltip("node:N"),
        alt.Tooltip("tool_name:N", title="tool"),
        alt.Tooltip("span_name:N", title="span"),
        alt.Tooltip("hlc_physical_ms:Q", title="HLC ms", format="d"),
        alt.Tooltip("hlc_logical:Q", title="HLC logical"),
        alt.Tooltip("wall_utc:N", title="wall clock (UTC)"),
        alt.Tooltip("order_in_hlc:Q", title="# in HLC order"),
        alt.Tooltip("inverted:N", title="clock inversion"),
    ]
    base = alt.Chart(frame)
    lanes_band = (
        alt.Chart(pd.DataFrame({"lane": lanes}))
        .mark_rule(color="#e6e6e6", strokeWidth=18, opacity=0.6)
        .encode(y=y)
    )
    points = base.mark_point(filled=True).encode(
        x=x,
        y=y,
        color=alt.Color("mark:N", scale=alt.Scale(domain=MARK_KINDS, range=MARK_COLORS), title="event"),
        shape=alt.Shape("mark:N", scale=alt.Scale(domain=MARK_KINDS, range=MARK_SHAPES), title="event"),
        size=alt.condition(alt.datum.is_span_edge, alt.value(45), alt.value(150)),
        opacity=alt.condition(alt.datum.is_span_edge, alt.value(0.45), alt.value(0.95)),
        tooltip=tooltip,
    )
    rings = (
        base.transform_filter(alt.datum.inverted)
        .mark_point(size=420, color="black", strokeWidth=1.5, filled=False)
        .encode(x=x, y=y, tooltip=tooltip)
    )
    layers: list[alt.Chart] = [lanes_band, points, rings]
    cancel = frame[frame["mark"] == CANCEL]
    if len(cancel):
        stop = cancel.nsmallest(1, "t_ms").assign(label="stop pressed")
        rule = alt.Chart(stop).mark_rule(color="#d62728", strokeDash=[6, 4], strokeWidth=2).encode(x=x)
        label = (
            alt.Chart(stop)
            .mark_text(color="#d62728", align="left", dx=4, dy=-6, fontWeight="bold")
            .encode(x=x, y=alt.value(0), text="label:N")
        )
        layers = [lanes_band, rule, label, points, rings]
    return (
        alt.layer(*layers)
        .properties(width=width, height=swimlane_height(events))
        .configure_legend(orient="bottom", columns=4)
        .interactive(bind_y=False)
    )
