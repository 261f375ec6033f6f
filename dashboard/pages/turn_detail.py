"""Turn detail: one turn on its HLC timeline, what each layer believes, what the user saw vs what happened."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from turnlens.dashboard import charts, common, data, export_buttons, filters, turn_view
from turnlens.export import timeline as turn_timeline
from turnlens.kernel import findings as finding_kinds

SEVERE = ("critical", "high")
CANCEL_LAYERS = ("http", "stream", "runtime", "tool")  # the per-layer columns of cancel_acks

st.title("Turn detail")

session_id = st.query_params.get("session", "")
turn_id = st.query_params.get("turn", "")
if not session_id or not turn_id:
    recent = data.query("recent_turns", limit=200)
    if not len(recent):
        common.empty("The store has no turns yet.")
        st.stop()
    labels = [f"{r.turn_id} · {r.findings} findings · session {r.session_id}" for r in recent.itertuples()]
    st.caption(
        "Pick a turn (the Turns page filters them), or open a link of the form `turn?session=…&turn=…`."
    )
    choice = st.selectbox("Turn", range(len(labels)), format_func=labels.__getitem__, index=None)
    if choice is None:
        st.stop()
    row = recent.iloc[choice]
    st.query_params.update({"session": row["session_id"], "turn": row["turn_id"]})
    st.rerun()

events = data.turn_query("turn_events", session=session_id, turn=turn_id)
if not len(events):
    st.error(f"No turn `{turn_id}` in session `{session_id}` in this store.", icon=":material/search_off:")
    st.stop()
findings = data.turn_query("turn_findings", session=session_id, turn=turn_id)
tokens = data.turn_query("turn_tokens", session=session_id, turn=turn_id).iloc[0]
cancel = data.turn_query("turn_cancel", session=session_id, turn=turn_id)
ledger = data.turn_query("turn_ledger", session=session_id, turn=turn_id)
wall_clock_only = bool(events["hlc"].isna().all())

head, buttons = st.columns([3, 2], vertical_alignment="bottom")
with head:
    st.subheader(f"`{turn_id}`")
    story = [f"session `{session_id}`"]
    if len(cancel):
        row = cancel.iloc[0]
        story.append(
            f"stopped (**{row['origin']}**) at {common.format_hlc(row['requested_hlc'])} UTC, "
            f"entering at the {row['requested_layer']} layer"
        )
    else:
        story.append("not stopped")
    story.append("**wall-clock order** (no HLC on these spans)" if wall_clock_only else "ordered by **HLC**")
    st.caption(" · ".join(story))
with buttons:
    st.caption("Export this turn as an incident file")
    export_buttons.render(session_id=session_id, turn_id=turn_id)

severe = int(findings["severity"].isin(SEVERE).sum()) if len(findings) else 0
ack = cancel["cancel_to_ack_ms"].iloc[0] if len(cancel) else None
before = tokens["tokens_before_stop"]
metrics = st.columns([1, 1, 1, 2, 1])
metrics[0].metric(
    "Cancel → last ack",
    "—" if not len(cancel) else ("never" if pd.isna(ack) else f"{ack:.0f} ms"),
    border=True,
)
metrics[1].metric("Tokens before stop", "—" if pd.isna(before) else f"{int(before):,}", border=True)
metrics[2].metric("Tool calls", len(ledger), border=True)
after_stop = int(ledger["committed_after_stop"].fillna(False).sum())
despite_stop = int((findings["kind"] == finding_kinds.CANCELLED_BUT_COMMITTED).sum()) if len(findings) else 0
cut_short = int((findings["kind"] == finding_kinds.INTERRUPTED_SIDE_EFFECT).sum()) if len(findings) else 0
metrics[3].metric(
    "Committed despite the stop",
    despite_stop,
    (f"{cut_short} cut short, outcome unknown · " if cut_short else "")  # first: the chip cuts a long line
    + f"{after_stop} after it · {max(despite_stop - after_stop, 0)} before it, never undone nor shown",
    delta_color="off",
    delta_arrow="off",
    border=True,
    help="`cancelled_but_committed` findings: side effects of a stopped turn that stood, whether committed "
    "after the stop or before it and never compensated nor shown to the user. Cut short: "
    "`interrupted_side_effect` findings, side-effecting calls the stop ended without a result, which may or "
    "may not have acted.",
)
metrics[4].metric(
    "Findings",
    len(findings),
    f"{severe} critical/high" if severe else None,
    delta_color="inverse",
    border=True,
)

# --- the waterfall ------------------------------------------------------------------------------------
st.subheader("Timeline")
order_col, window_col, _ = st.columns([1, 1, 3])
with order_col:
    wall_order = filters.toggle(
        "Wall-clock order",
        param="order_wall",
        help="Place spans by each node's own wall clock instead of the HLC; in the event lanes below, ringed "
        "events are where the two disagree.",
    )
order = "wall_clock" if wall_order else "hlc"
timeline = turn_timeline.timeline_frame(events, order=order)  # the rows every view of the turn below places
around_stop = charts.stop_window(timeline)
with window_col:
    whole = around_stop is None or filters.toggle(
        "Whole turn",
        param="whole",
        help="By default the chart opens on the stretch around the tool calls and the stop.",
    )
window = None if whole else around_stop
inversions = int(timeline["inverted"].sum())
with common.section():
    spans = data.turn_query("turn_spans", session=session_id, turn=turn_id)
    bars, marks = charts.waterfall_frame(timeline, spans)
    picked = common.draw_chart(
        charts.waterfall(bars, marks, window=window),
        height=charts.waterfall_height(bars) + 190,  # + axis and legends (Streamlit ignores a layer's height)
        on_select="rerun",
        selection_mode=["span"],
        key="waterfall",
    )
    streamed = charts.token_frame(timeline)
    if len(streamed):
        common.show_chart(charts.token_line(streamed, stop_ms=charts.stop_ms(marks), window=window), room=40)
    st.caption(
        f"{len(bars)} spans, nested under their parents, on the turn's "
        f"{'HLC' if order == 'hlc' else 'wall clock'} (UTC) · red dashed rule: the stop · diamonds: commits, "
        "purple after the stop · scroll to zoom, drag to pan, double-click to reset · click a span for its "
        f"attributes and events · {len(timeline)} events, {inversions} clock inversion"
        f"{'s' if inversions != 1 else ''} (HLC and wall clock disagree; ringed in the events by layer)."
    )
    turn_view.span_detail(spans, bars, turn_view.selected_span(picked, bars, marks))

# a second chart and table of the turn, drawn only once opened
layers = common.lazy_expander(
    "Events by layer (swimlane) and raw events", icon=":material/table_rows:", key="events_by_layer"
)
if layers is not None:
    with layers:
        window = None if whole else turn_timeline.action_window(timeline)
        common.show_chart(
            turn_timeline.swimlane(events, order=order, window=window),
            room=110,
        )
        st.caption(
            f"{len(timeline)} events · {inversions} clock inversion{'s' if inversions != 1 else ''} "
            "(ringed) · stream progress is the token line above."
        )
        raw = events.assign(clock_inversion=timeline["inverted"].to_numpy()).drop(
            columns=["session_id", "turn_id"]
        )
        st.dataframe(
            raw.sort_values("seq" if order == "hlc" else "wall_seq"), hide_index=True, width="stretch"
        )

# --- the five layers ----------------------------------------------------------------------------------
verdict_col, cancel_col = st.columns([3, 2])
with verdict_col, common.section():
    st.subheader("What each layer believes")
    verdicts = data.turn_query("turn_verdicts", session=session_id, turn=turn_id)
    if len(verdicts):
        common.show_chart(charts.verdict_matrix(verdicts), room=70)
        details = common.lazy_expander(
            "Each layer's verdict and what it rests on", icon=":material/table_rows:", key="verdict_details"
        )
        if details is not None:
            with details:
                st.dataframe(
                    verdicts.drop(columns=["session_id", "turn_id"], errors="ignore"),
                    hide_index=True,
                    width="stretch",
                )
    else:
        common.empty("No layer verdicts for this turn.")
with cancel_col:
    st.subheader("The cancel, layer by layer")
    if len(cancel):
        row = cancel.iloc[0]
        per_layer = pd.DataFrame(
            [
                {
                    "layer": layer,
                    "reached": layer in list(row["layers_reached"]),
                    "acknowledged": layer in list(row["layers_acked"]),
                    "ack after (ms)": row[f"{layer}_ack_ms"],
                }
                for layer in CANCEL_LAYERS
            ]
        )
        st.caption(f"Entered at **{row['requested_layer']}** at {common.format_hlc(row['requested_hlc'])}.")
        st.dataframe(
            per_layer,
            hide_index=True,
            width="stretch",
            column_config={"ack after (ms)": st.column_config.NumberColumn(format="%.0f")},
        )
    else:
        common.empty("The user did not stop this turn.")

# --- what the user saw vs what happened ---------------------------------------------------------------
st.subheader("What the user saw vs what happened")
saw_col, happened_col = st.columns([2, 5])
with saw_col:
    stopped = len(cancel) > 0
    before = tokens["tokens_before_stop"]
    st.metric(
        "Tokens rendered before the stop" if stopped else "Tokens rendered",
        "—" if pd.isna(before) else f"{int(before):,}",
        border=True,
    )
    billed = tokens["tokens_billed"]
    st.metric("Tokens billed", "unknown" if pd.isna(billed) else f"{int(billed):,}", border=True)
    shown = int(ledger["receipt_shown"].sum()) if len(ledger) else 0
    st.metric(
        "Side effects the user was told about",
        f"{shown} of {len(ledger)}",
        border=True,
        help="A `transcript.receipt` showed the side effect to the user (with an undo).",
    )
with happened_col:
    st.markdown("**What happened in the world** — the side-effect ledger")
    if len(ledger):
        st.dataframe(
            common.hlc_columns(ledger),
            hide_index=True,
            width="stretch",
            column_config={
                "committed_after_stop": st.column_config.CheckboxColumn(
                    "after stop", help="committed after the stop"
                ),
                "receipt_shown": st.column_config.CheckboxColumn("receipt", help="shown to the user"),
                "undone": st.column_config.CheckboxColumn("undone", help="tool.compensated"),
                "undo_failed": st.column_config.CheckboxColumn("undo failed"),
            },
        )
    else:
        common.empty("No tool calls in this turn.")

# --- findings and skew --------------------------------------------------------------------------------
findings_col, skew_col = st.columns([3, 2])
with findings_col:
    st.subheader("Findings")
    if not len(findings):
        st.success("No findings: every layer agrees.", icon=":material/check_circle:")
    for finding in findings.itertuples():
        box = st.error if finding.severity in SEVERE else st.warning
        call = f" · call `{finding.tool_call_id}`" if pd.notna(finding.tool_call_id) else ""
        box(
            f"**{finding.kind}** ({finding.severity}){call} · at "
            f"{common.format_hlc(finding.detected_hlc)}  \n"
            f"{finding.evidence}",
            icon=":material/report:",
        )
with skew_col:
    st.subheader("Skew per node")
    skew = data.turn_query("turn_skew", session=session_id, turn=turn_id)
    if len(skew):
        tolerance = float(data.query("dashboard_settings")["skew_tolerance_ms"].iloc[0])
        worst = skew.sort_values("max_skew_ms", ascending=False, na_position="last").iloc[0]
        largest = "—" if pd.isna(worst["max_skew_ms"]) else f"{worst['max_skew_ms']:.0f}"
        over = int((skew["max_skew_ms"] > tolerance).sum())
        nodes = f"{len(skew)} node{'s' if len(skew) != 1 else ''}"
        st.caption(
            f"Largest: {largest} ms on `{worst['node']}`; {over} of {nodes} over the tolerance of "
            f"{tolerance:g} ms (HLC physical part minus the node's wall clock)."
        )
        chart = common.lazy_expander("Skew of each node", icon=":material/bar_chart:", key="skew_by_node")
        if chart is not None:
            with chart:
                common.show_chart(charts.skew_by_node(skew, tolerance_ms=tolerance))
    else:
        common.empty("No HLC on this turn's events: skew cannot be measured.")
