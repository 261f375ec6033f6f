"""Turn detail: one turn on its HLC timeline, what each layer believes, what the user saw vs what happened."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from turnlens.dashboard import charts, common, data, export_buttons, filters

st.title("Turn detail")

session_id = st.query_params.get("session", "")
turn_id = st.query_params.get("turn", "")
if not session_id or not turn_id:
    recent = data.query(
        "turns_list",
        from_ms=None,
        to_ms=None,
        session="",
        statuses=[],
        kinds=[],
        tools=[],
        tiers=[],
        limit=200,
    )
    if not len(recent):
        common.empty("The store has no turns yet.")
        st.stop()
    recent = recent.sort_values(["findings", "started_at"], ascending=False)
    labels = [
        f"{r.turn_id} · {r.status} · {r.findings} findings · session {r.session_id}"
        for r in recent.itertuples()
    ]
    st.caption(
        "Pick a turn (the Turns page filters them), or open a link of the form `turn?session=…&turn=…`."
    )
    choice = st.selectbox("Turn", range(len(labels)), format_func=labels.__getitem__, index=None)
    if choice is None:
        st.stop()
    row = recent.iloc[choice]
    st.query_params.update({"session": row["session_id"], "turn": row["turn_id"]})
    st.rerun()

summary = data.query("turn_summary", session=session_id, turn=turn_id)
if not len(summary):
    st.error(f"No turn `{turn_id}` in session `{session_id}` in this store.", icon=":material/search_off:")
    st.stop()
turn = summary.iloc[0]

head, buttons = st.columns([4, 2], vertical_alignment="bottom")
with head:
    st.subheader(f"`{turn_id}`")
    st.caption(
        f"session `{session_id}` · ordered by **{turn.get('ordering', 'hlc')}**"
        + (
            " (no HLC on these spans: wall-clock order, marked so)"
            if turn.get("ordering") == "wall_clock"
            else ""
        )
    )
with buttons:
    export_buttons.render(session_id=session_id, turn_id=turn_id)

metrics = st.columns(6)
metrics[0].metric("Status", str(turn.get("status", "—")), border=True)
metrics[1].metric("Cancel origin", str(turn.get("cancel_origin") or "—"), border=True)
metrics[2].metric(
    "Tokens streamed",
    f"{int(turn['tokens_streamed']):,}" if pd.notna(turn.get("tokens_streamed")) else "—",
    border=True,
)
metrics[3].metric("Tool calls", int(turn.get("tool_calls") or 0), border=True)
metrics[4].metric("Side effects", int(turn.get("side_effects") or 0), border=True)
metrics[5].metric("Findings", int(turn.get("findings") or 0), border=True)

# --- the swimlane -----------------------------------------------------------------------------------
st.subheader("Timeline")
events = data.query("turn_events", session=session_id, turn=turn_id)
wall_order = filters.toggle(
    "Wall-clock order",
    param="order_wall",
    help="Place events by each node's own wall clock instead of the HLC; "
    "ringed events are where the two orders disagree.",
)
order = "wall_clock" if wall_order else "hlc"
if len(events):
    st.altair_chart(charts.swimlane(events, order=order), width="stretch")
    timeline = charts.timeline_frame(events, order=order)
    inversions = int(timeline["inverted"].sum())
    st.caption(
        f"{len(timeline)} events · {inversions} clock inversion{'s' if inversions != 1 else ''} (ringed) · "
        "red rule: the stop · diamonds: commits (purple when after the stop)."
    )
    with st.expander("Raw events", icon=":material/table_rows:"):
        raw = events.assign(inverted=timeline["inverted"].to_numpy())
        st.dataframe(raw, hide_index=True, width="stretch")
else:
    common.empty("No events recorded for this turn.")

# --- the five layers ----------------------------------------------------------------------------------
verdict_col, cancel_col = st.columns([3, 2])
with verdict_col:
    st.subheader("What each layer believes")
    verdicts = data.query("turn_verdicts", session=session_id, turn=turn_id)
    if len(verdicts):
        st.altair_chart(charts.verdict_matrix(verdicts), width="stretch")
        st.dataframe(
            verdicts.drop(columns=["session_id", "turn_id"], errors="ignore"),
            hide_index=True,
            width="stretch",
        )
    else:
        common.empty("No layer verdicts for this turn.")
with cancel_col:
    st.subheader("The cancel")
    cancel = data.query("turn_cancel", session=session_id, turn=turn_id)
    if len(cancel):
        row = cancel.iloc[0]
        total = row.get("cancel_to_ack_ms")
        st.metric(
            "Cancel → last ack", "never acknowledged" if pd.isna(total) else f"{total:.0f} ms", border=True
        )
        per_layer = pd.DataFrame(
            [
                {"layer": column.removesuffix("_ack_ms"), "acknowledged after": row[column]}
                for column in cancel.columns
                if column.endswith("_ack_ms")
            ]
        )
        st.dataframe(
            per_layer,
            hide_index=True,
            width="stretch",
            column_config={
                "acknowledged after": st.column_config.NumberColumn(format="%.0f ms"),
            },
        )
    else:
        common.empty("No cancel in this turn.")

# --- what the user saw vs what happened ---------------------------------------------------------------
st.subheader("What the user saw vs what happened")
saw_col, happened_col = st.columns([2, 5])
ledger = data.query("turn_side_effects", session=session_id, turn=turn_id)
with saw_col:
    st.markdown("**What the user saw**")
    usage = data.query("turn_usage", session=session_id, turn=turn_id)
    before_stop = turn.get("tokens_before_cancel", turn.get("tokens_streamed"))
    st.metric(
        "Tokens rendered before the stop" if turn.get("status") == "cancelled" else "Tokens rendered",
        "—" if pd.isna(before_stop) else f"{int(before_stop):,}",
        border=True,
    )
    receipts = (
        int(ledger["receipt_shown"].fillna(False).astype(bool).sum()) if "receipt_shown" in ledger else 0
    )
    st.metric(
        "Side effects shown to the user",
        f"{receipts} of {len(ledger)}",
        border=True,
        help="A `transcript.receipt` told the user about the side effect (with an undo).",
    )
    if len(usage):
        st.dataframe(
            usage.drop(columns=["session_id", "turn_id"], errors="ignore").T.rename(columns={0: "usage"}),
            width="stretch",
        )
with happened_col:
    st.markdown("**What happened in the world** — the side-effect ledger")
    if len(ledger):
        st.dataframe(
            common.hlc_columns(ledger.drop(columns=["session_id", "turn_id"], errors="ignore")),
            hide_index=True,
            width="stretch",
        )
    else:
        common.empty("No tool calls in this turn.")

# --- findings and skew --------------------------------------------------------------------------------
findings_col, skew_col = st.columns([3, 2])
with findings_col:
    st.subheader("Findings")
    findings = data.query("turn_findings", session=session_id, turn=turn_id)
    if not len(findings):
        st.success("No findings: every layer agrees.", icon=":material/check_circle:")
    for finding in findings.itertuples():
        box = st.error if finding.severity in ("critical", "high") else st.warning
        call = f" · call `{finding.tool_call_id}`" if pd.notna(finding.tool_call_id) else ""
        box(
            f"**{finding.kind}** ({finding.severity}){call} at {common.format_hlc(finding.detected_hlc)}  \n"
            f"{finding.evidence}",
            icon=":material/report:",
        )
with skew_col:
    st.subheader("Skew per node")
    if len(events) and "skew_ms" in events:
        skew = (
            events.assign(abs_skew=events["skew_ms"].abs())
            .groupby("node", dropna=False)
            .agg(max_skew_ms=("abs_skew", "max"), events=("abs_skew", "size"))
            .reset_index()
        )
        tolerance = data.query("dashboard_settings")["skew_tolerance_ms"].iloc[0]
        st.altair_chart(charts.skew_by_node(skew, tolerance_ms=float(tolerance)), width="stretch")
    else:
        common.empty("No HLC on this turn's events: skew cannot be measured.")
