"""Altair charts of a turn and of the fleet, shared by the dashboard and the incident export.

Every builder is pure: rows in (a pandas DataFrame with the columns of the view it comes from),
an `alt.Chart` out, no Streamlit and no store access, so `export/report.py` renders the same
pictures to SVG.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
from turnlens.export.timeline import (  # the turn's timeline, shared with the export
    CANCEL,
    CANCEL_STEP,
    COMMIT,
    COMMIT_AFTER_STOP,
    COMPENSATION,
    FAILURE,
    LANES,
    MARK_COLORS,
    MARK_KINDS,
    MARK_SHAPES,
    SVG,
    action_window,
)
from turnlens.kernel import contract


def skew_by_node(skew: pd.DataFrame, *, tolerance_ms: float) -> alt.LayerChart:
    """Max HLC skew per node as bars against the tolerance; needs `node` and `max_skew_ms`."""
    bars = (
        alt.Chart(skew)
        .mark_bar()
        .encode(
            x=alt.X("max_skew_ms:Q", title="max |HLC − wall clock| (ms)"),
            y=alt.Y("node:N", sort="-x", title=None),
            color=alt.condition(
                alt.datum.max_skew_ms > tolerance_ms, alt.value("#d62728"), alt.value("#4c78a8")
            ),
            tooltip=[alt.Tooltip(column) for column in skew.columns],
        )
    )
    rule = (
        alt.Chart(pd.DataFrame({"tolerance": [tolerance_ms]}))
        .mark_rule(color="#d62728", strokeDash=[4, 4])
        .encode(x=alt.X("tolerance:Q"))
    )
    return alt.LayerChart(layer=[bars, rule], height=max(80, 26 * len(skew)), width="container")


# Verdicts grouped by what they say about the work, so layers that disagree differ in colour.
_BELIEFS = {
    **dict.fromkeys(["cancelled", "client_disconnect", "discarded", "compensated", "not_charged"], "stopped"),
    **dict.fromkeys(["completed", "succeeded", "acknowledged", "charged"], "went ahead"),
}
BELIEF_COLORS = {"stopped": "#9ecae9", "went ahead": "#a1d99b", "unresolved": "#fdae6b"}


def verdict_matrix(verdicts: pd.DataFrame) -> alt.LayerChart:
    """What each layer believes happened, one cell per layer in lane order; needs `layer` and `verdict`."""
    frame = verdicts.copy()
    frame["lane"] = frame["layer"].where(frame["layer"].isin(contract.LAYERS), "unknown")
    frame["row"] = "verdict"
    frame["belief"] = frame["verdict"].map(_BELIEFS).fillna("unresolved")
    lanes = [lane for lane in LANES if lane in set(frame["lane"])]
    x = alt.X("lane:N", sort=lanes, title=None, axis=alt.Axis(orient="top", labelAngle=0, labelFontSize=13))
    y = alt.Y("row:N", title=None, axis=None)
    tooltip = [alt.Tooltip(c) for c in ("layer", "verdict", "detail") if c in frame]
    cells = (
        alt.Chart(frame)
        .mark_rect(stroke="white", strokeWidth=4, cornerRadius=4)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "belief:N",
                scale=alt.Scale(domain=list(BELIEF_COLORS), range=list(BELIEF_COLORS.values())),
                legend=alt.Legend(orient="bottom", title=None),
            ),
            tooltip=tooltip,
        )
    )
    text = (
        alt.Chart(frame)
        .mark_text(fontSize=14, fontWeight="bold")
        .encode(x=x, y=y, text=alt.Text("verdict:N"), tooltip=tooltip)
    )
    return alt.LayerChart(layer=[cells, text], height=56, width="container")


def cancel_latency(
    acks: pd.DataFrame, *, objective_ms: float = 100.0, page_ms: float = 500.0
) -> alt.LayerChart:
    """Cancel-to-ack latency of each cancelled turn; needs `requested_at` (datetime), `cancel_to_ack_ms`,
    `session_id` and `turn_id` (a click selects the turn: the selection parameter `turn`)."""
    points = (
        alt.Chart(acks)
        .mark_circle(size=40, opacity=0.7)
        .encode(
            x=alt.X("requested_at:T", title=None),
            y=alt.Y("cancel_to_ack_ms:Q", title="cancel → ack (ms)", scale=alt.Scale(type="symlog")),
            color=alt.condition(
                alt.datum.cancel_to_ack_ms > objective_ms, alt.value("#d62728"), alt.value("#4c78a8")
            ),
            tooltip=[
                alt.Tooltip(c) for c in ("session_id", "turn_id", "origin", "cancel_to_ack_ms") if c in acks
            ],
        )
        .add_params(
            alt.selection_point(name="turn", fields=["session_id", "turn_id"], on="click", empty=False)
        )
    )
    lines = pd.DataFrame({"ms": [objective_ms, page_ms], "line": ["P95 objective", "P99 page"]})
    rules = (
        alt.Chart(lines)
        .mark_rule(strokeDash=[4, 4], color="#999")
        .encode(y=alt.Y("ms:Q"), tooltip=[alt.Tooltip("line:N"), alt.Tooltip("ms:Q")])
    )
    return alt.LayerChart(layer=[points, rules], height=260, width="container", usermeta=SVG)


# --- the waterfall: spans as bars, nested under their parents -----------------------------------------------

LAYER_COLORS = ["#4c78a8", "#72b7b2", "#54a24b", "#f58518", "#9d755d", "#b279a2", "#bab0ac"]
_INDENT = "\u00b7\u00a0\u00a0"  # one level of nesting: SVG collapses plain spaces, so a dot marks it
LABEL_WIDTH = 260  # px of span names left of the bars; the token line's axis takes as much, so times align
# Step events drawn on their span's row; progress events are folded into the token line instead.
_WATERFALL_MARKS = [CANCEL, COMMIT_AFTER_STOP, COMMIT, CANCEL_STEP, COMPENSATION, FAILURE]


def _span_order(spans: pd.DataFrame) -> list[tuple[str, int]]:
    """(span_id, depth) depth-first, children by start time; a span whose parent is elsewhere is a root."""
    ids = set(spans["span_id"])
    children: dict[str | None, list[str]] = {}
    ordered = spans.sort_values(["start_ms", "span_id"], kind="stable")
    for span_id, parent in zip(ordered["span_id"], ordered["parent_span_id"], strict=True):
        key = parent if isinstance(parent, str) and parent in ids else None
        children.setdefault(key, []).append(span_id)
    out: list[tuple[str, int]] = []
    stack = [(span_id, 0) for span_id in reversed(children.get(None, []))]
    while stack:
        span_id, depth = stack.pop()
        out.append((span_id, depth))
        stack.extend((child, depth + 1) for child in reversed(children.get(span_id, [])))
    return out


def waterfall_frame(timeline: pd.DataFrame, spans: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(bars, marks): one bar per span placed like the timeline's events, and the step events on their span.

    `timeline` is timeline_frame's rows of the turn's events (span starts, ends and events) in the order
    shown, `spans` the turn_spans rows (for the parent of each span). A span that never ended runs to the
    turn's last event and says so.
    """
    edges = (
        timeline[timeline["source"].isin(["span_start", "span_end"])] if "source" in timeline else timeline
    )
    starts = edges[edges["source"] == "span_start"].groupby("span_id")["at_ms"].min()
    ends = edges[edges["source"] == "span_end"].groupby("span_id")["at_ms"].max()
    last = float(timeline["at_ms"].max()) if len(timeline) else 0.0
    bars = spans[["span_id", "parent_span_id", "name", "layer", "node", "status_code"]].copy()
    bars["start_ms"] = bars["span_id"].map(starts).astype(float)
    bars = bars[bars["start_ms"].notna()].copy()
    bars["open"] = bars["span_id"].map(ends).isna()
    bars["end_ms"] = bars["span_id"].map(ends).astype(float).fillna(last)
    bars["duration_ms"] = bars["end_ms"] - bars["start_ms"]
    depth = dict(_span_order(bars))
    rank = {span_id: i for i, (span_id, _) in enumerate(_span_order(bars))}
    bars["depth"] = bars["span_id"].map(depth)
    bars["row"] = bars["span_id"].map(rank)
    bars = bars.sort_values("row").reset_index(drop=True)
    bars["label"] = [
        (f"{_INDENT * (int(d) - 1)}└ " if d else "") + name + (f" #{i + 1}" if i else "")
        for d, name, i in zip(bars["depth"], bars["name"], bars.groupby("name").cumcount(), strict=True)
    ]
    bars["lane"] = bars["layer"].where(bars["layer"].isin(contract.LAYERS), "unknown")
    bars["duration"] = [
        ("running " if still_open else "") + _duration_text(ms)
        for ms, still_open in zip(bars["duration_ms"], bars["open"], strict=True)
    ]
    bars["start_utc"] = _utc_text(bars["start_ms"])
    labels = dict(zip(bars["span_id"], bars["label"], strict=True))
    marks = timeline[timeline["mark"].isin(_WATERFALL_MARKS) & timeline["span_id"].isin(labels)].copy()
    marks["label"] = marks["span_id"].map(labels)
    marks["at_utc"] = _utc_text(marks["at_ms"])
    tool = marks["tool_name"].where(marks["tool_name"].notna(), "")
    marks["caption"] = [
        f"{name} {verb}".strip() if kind in (COMMIT, COMMIT_AFTER_STOP) else ""
        for name, verb, kind in zip(
            tool, marks["event"].str.replace("tool.", "", regex=False), marks["mark"], strict=True
        )
    ]
    return bars, marks.reset_index(drop=True)


def _time_axis() -> alt.Axis:
    """Unix ms shown as UTC times of day with milliseconds; quantitative, so ticks stay even when zoomed."""
    return alt.Axis(
        labelExpr="utcFormat(datum.value, '%H:%M:%S.%L')",
        labelAngle=0,
        grid=True,
        tickCount=8,
        labelOverlap=True,
    )


def _duration_text(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.1f} ms" if ms < 10 else f"{ms:.0f} ms"


def _utc_text(ms: pd.Series) -> pd.Series:
    return pd.to_datetime(ms, unit="ms", utc=True).dt.strftime("%H:%M:%S.%f").str[:-3]


def stop_window(timeline: pd.DataFrame) -> tuple[float, float] | None:
    """The default view of a turn (its timeline_frame rows), Unix ms: the stretch around the tool calls and
    the stop (action_window)."""
    window = action_window(timeline)
    if window is None or not len(timeline):
        return None
    base = float(timeline["at_ms"].min())
    return base + window[0], base + window[1]


def waterfall(
    bars: pd.DataFrame,
    marks: pd.DataFrame,
    *,
    window: tuple[float, float] | None = None,
    width: int | str = "container",
) -> alt.LayerChart:
    """Spans as bars on the turn's clock (HLC by default), nested under their parents, durations beside them.

    The stop is a red dashed rule across every span; commits are diamonds on their tool's row, captioned
    with the tool's name, purple when they landed after the stop. Drag to pan, scroll to zoom; `window`
    (Unix ms) is the initial view. A click on a bar selects the span (the selection parameter `span`).
    `token_line` draws the tokens streamed under it on the same axis.
    """
    rows = list(bars["label"])
    domain = [float(window[0]), float(window[1])] if window else alt.Undefined
    scale = alt.Scale(domain=domain, zero=False, nice=False)
    x = alt.X("start_ms:Q", title="time (UTC) on the turn's clock", scale=scale, axis=_time_axis())
    y = alt.Y(
        "label:N",
        sort=rows,
        title=None,
        axis=alt.Axis(
            labelLimit=LABEL_WIDTH,
            labelFontSize=12,
            labelAlign="left",
            labelPadding=LABEL_WIDTH,
            labelOverlap=False,
        ),
    )
    picked = alt.selection_point(name="span", fields=["span_id"], on="click", empty=False)
    zoom = alt.selection_interval(name="zoom", bind="scales", encodings=["x"])
    tooltip = [
        alt.Tooltip("name:N", title="span"),
        alt.Tooltip("lane:N", title="layer"),
        alt.Tooltip("node:N"),
        alt.Tooltip("start_utc:N", title="start (UTC)"),
        alt.Tooltip("duration:N"),
        alt.Tooltip("status_code:N", title="status"),
    ]
    span_bars = (
        alt.Chart(bars)
        .mark_bar(height=14, cornerRadius=2, clip=True)
        .encode(
            x=x,
            x2="end_ms:Q",
            y=y,
            color=alt.Color("lane:N", scale=alt.Scale(domain=LANES, range=LAYER_COLORS), title="layer"),
            opacity=alt.condition(picked, alt.value(1.0), alt.value(0.75)),
            stroke=alt.condition(picked, alt.value("#111"), alt.value(None)),
            strokeWidth=alt.condition(picked, alt.value(2), alt.value(0)),
            tooltip=tooltip,
        )
        .add_params(picked, zoom)
    )
    durations = (
        alt.Chart(bars)
        .mark_text(align="left", dx=4, fontSize=11, color="#444", clip=True)
        .encode(x=alt.X("end_ms:Q"), y=y, text=alt.Text("duration:N"))
    )
    mark_tooltip = [
        alt.Tooltip("event:N"),
        alt.Tooltip("tool_name:N", title="tool"),
        alt.Tooltip("at_utc:N", title="at (UTC)"),
        alt.Tooltip("node:N"),
    ]
    at = alt.X("at_ms:Q")
    step_marks = (
        alt.Chart(marks)
        .mark_point(filled=True, size=130, stroke="white", strokeWidth=1, clip=True)
        .encode(
            x=at,
            y=y,
            fill=alt.Fill("mark:N", scale=alt.Scale(domain=MARK_KINDS, range=MARK_COLORS), title="event"),
            shape=alt.Shape("mark:N", scale=alt.Scale(domain=MARK_KINDS, range=MARK_SHAPES), title="event"),
            tooltip=mark_tooltip,
        )
    )
    captions = (
        alt.Chart(marks[marks["caption"] != ""])
        .mark_text(align="left", dx=8, dy=-10, fontSize=11, fontWeight="bold", color="#6a1b9a", clip=True)
        .encode(x=at, y=y, text=alt.Text("caption:N"))
    )
    layers: list[alt.Chart] = [span_bars, durations, step_marks, captions]
    stop = marks[marks["mark"] == CANCEL].nsmallest(1, "at_ms").assign(text="stop pressed")
    if len(stop):
        rule = alt.Chart(stop).mark_rule(color="#d62728", strokeDash=[6, 4], strokeWidth=2, clip=True)
        rule = rule.encode(x=at)
        label = (
            alt.Chart(stop)
            .mark_text(color="#d62728", align="left", dx=4, dy=-6, fontWeight="bold", clip=True)
            .encode(x=at, y=alt.YValue(0), text=alt.Text("text:N"))
        )
        layers[1:1] = [rule, label]
    chart = alt.layer(*layers).properties(
        height=waterfall_height(bars),
        width=width,
        usermeta=SVG,
    )
    return chart.configure_legend(orient="bottom", columns=4, labelLimit=220).configure_axisY(
        minExtent=LABEL_WIDTH, maxExtent=LABEL_WIDTH
    )


def waterfall_height(bars: pd.DataFrame) -> int:
    """24 px a span, so a span name lines up with its bar however many there are."""
    return max(120, 24 * len(bars))


def token_frame(timeline: pd.DataFrame) -> pd.DataFrame:
    """`at_ms`, `tokens`: the tokens streamed so far at each `stream.progress` event of a turn's
    timeline_frame rows, folded into one line."""
    if "stream_tokens" not in timeline:
        return pd.DataFrame({"at_ms": [], "tokens": []})
    streamed = (timeline["event"] == contract.EV_STREAM_PROGRESS) & timeline["stream_tokens"].notna()
    progress = timeline[streamed]
    progress = progress[["at_ms", "stream_tokens"]].rename(columns={"stream_tokens": "tokens"})
    progress = progress.astype(float).sort_values("at_ms").reset_index(drop=True)
    return progress.assign(at_utc=_utc_text(progress["at_ms"]))


def token_line(
    tokens: pd.DataFrame,
    *,
    stop_ms: float | None = None,
    window: tuple[float, float] | None = None,
    width: int | str = "container",
) -> alt.LayerChart:
    """The tokens streamed so far (token_frame) as a step line, aligned with the waterfall above it.

    The span names' column is left empty at the same width, so a time sits under the same time above.
    """
    domain = [float(window[0]), float(window[1])] if window else alt.Undefined
    x = alt.X(
        "at_ms:Q", title=None, scale=alt.Scale(domain=domain, zero=False, nice=False), axis=_time_axis()
    )
    line = (
        alt.Chart(tokens)
        .mark_area(line={"color": "#4c78a8"}, color="#c6dbef", interpolate="step-after", clip=True)
        .encode(
            x=x,
            y=alt.Y(
                "tokens:Q",
                title="tokens sent",
                axis=alt.Axis(tickCount=3, titleAngle=0, titleAlign="left", titleX=-LABEL_WIDTH, titleY=-6),
            ),
            tooltip=[alt.Tooltip("at_utc:N", title="at (UTC)"), alt.Tooltip("tokens:Q")],
        )
        .add_params(alt.selection_interval(bind="scales", encodings=["x"]))
    )
    layers: list[alt.Chart] = [line]
    if stop_ms is not None:
        stop = pd.DataFrame({"at_ms": [stop_ms]})
        layers.append(
            alt.Chart(stop)
            .mark_rule(color="#d62728", strokeDash=[6, 4], strokeWidth=2, clip=True)
            .encode(x=x)
        )
    return (
        alt.layer(*layers)
        .properties(height=70, width=width)
        .configure_axisY(minExtent=LABEL_WIDTH, maxExtent=LABEL_WIDTH)
    )


def stop_ms(marks: pd.DataFrame) -> float | None:
    """When the user pressed stop (the first `cancel.requested` of waterfall_frame's marks), Unix ms."""
    stops = marks.loc[marks["mark"] == CANCEL, "at_ms"]
    return float(stops.min()) if len(stops) else None


# --- the fleet: SLO panel and findings ranked ------------------------------------------------------------


def _threshold_rules(lines: pd.DataFrame, y: str) -> list[alt.Chart]:
    """Dashed horizontal rules with their label at the left end; `lines` has `y` and `label`."""
    rule = alt.Chart(lines).mark_rule(strokeDash=[5, 4], color="#d62728").encode(y=alt.Y(f"{y}:Q"))
    text = (
        alt.Chart(lines)
        .mark_text(align="left", baseline="bottom", dx=4, dy=-2, color="#d62728", fontWeight="bold")
        .encode(y=alt.Y(f"{y}:Q"), x=alt.XValue(0), text=alt.Text("label:N"))
    )
    return [rule, text]


def slo_latency(windows: pd.DataFrame, *, objective_ms: float, page_ms: float) -> alt.LayerChart:
    """Cancel-to-ack P95 and P99 per SLO window against the objective and the paging threshold.

    Dragging across it selects a stretch of time (the selection parameter `brush`).

    Needs `window_start` (datetime), `p95_ms`, `p99_ms`, `cancels`.
    """
    long = windows.melt(
        id_vars=["window_start", "cancels"],
        value_vars=["p95_ms", "p99_ms"],
        var_name="percentile",
        value_name="ms",
    )
    long["percentile"] = long["percentile"].map({"p95_ms": "P95", "p99_ms": "P99"})
    lines = (
        alt.Chart(long)
        .mark_line(point=True, interpolate="step-after")
        .encode(
            x=alt.X("window_start:T", title=None, axis=alt.Axis(format="%H:%M")),
            y=alt.Y("ms:Q", title="cancel → ack (ms)"),
            color=alt.Color(
                "percentile:N", scale=alt.Scale(range=["#4c78a8", "#f58518"]), legend=alt.Legend(orient="top")
            ),
            tooltip=[
                alt.Tooltip("window_start:T", title="window from", format="%Y-%m-%d %H:%M"),
                alt.Tooltip("percentile:N"),
                alt.Tooltip("ms:Q", format=".0f"),
                alt.Tooltip("cancels:Q"),
            ],
        )
    )
    thresholds = pd.DataFrame(
        {
            "ms": [objective_ms, page_ms],
            "label": [f"P95 objective {objective_ms:g} ms", f"P99 pages {page_ms:g} ms"],
        }
    )
    brush = alt.selection_interval(name="brush", encodings=["x"])
    return alt.LayerChart(
        layer=[lines.add_params(brush), *_threshold_rules(thresholds, "ms")],
        height=220,
        width="container",
        usermeta=SVG,
    )


def slo_burn_rate(windows: pd.DataFrame, *, fast_burn: float = 14.4) -> alt.LayerChart:
    """The error budget's burn rate per SLO window (1: spent exactly over the period); needs `window_start`,
    `burn_rate`, `cancels`, `over_slo`."""
    bars = (
        alt.Chart(windows)
        .mark_bar(color="#b279a2")
        .encode(
            x=alt.X("window_start:T", title=None, axis=alt.Axis(format="%H:%M")),
            y=alt.Y("burn_rate:Q", title="burn rate"),
            color=alt.condition(alt.datum.burn_rate > fast_burn, alt.value("#d62728"), alt.value("#9ecae9")),
            tooltip=[
                alt.Tooltip("window_start:T", title="window from", format="%Y-%m-%d %H:%M"),
                alt.Tooltip("burn_rate:Q", format=".1f"),
                alt.Tooltip("over_slo:Q"),
                alt.Tooltip("cancels:Q"),
            ],
        )
    )
    thresholds = pd.DataFrame(
        {"burn_rate": [1.0, fast_burn], "label": ["1 = budget spent exactly", f"{fast_burn:g} = fast burn"]}
    )
    return alt.LayerChart(
        layer=[bars, *_threshold_rules(thresholds, "burn_rate")], height=220, width="container", usermeta=SVG
    )


def findings_ranked(findings: pd.DataFrame) -> alt.Chart:
    """Findings per kind as one ranked bar each, most frequent first; a click selects the kind (`kind`).

    Needs `kind` and `findings`; thirteen kinds read better ranked than as thirteen colours in a stack.
    """
    totals = (
        findings.groupby("kind", as_index=False)["findings"].sum().sort_values("findings", ascending=False)
    )
    picked = alt.selection_point(name="kind", fields=["kind"], on="click", empty=False)
    return (
        alt.Chart(totals)
        .mark_bar(color="#4c78a8", cursor="pointer")
        .encode(
            x=alt.X("findings:Q", title="findings"),
            y=alt.Y("kind:N", sort="-x", title=None, axis=alt.Axis(labelLimit=220)),
            opacity=alt.condition(picked, alt.value(1.0), alt.value(0.8)),
            tooltip=[alt.Tooltip("kind:N"), alt.Tooltip("findings:Q")],
        )
        .add_params(picked)
        .properties(height=max(80, 24 * len(totals)), width="container", usermeta=SVG)
    )
