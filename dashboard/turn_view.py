"""The Turn detail page's waterfall pieces that are not charts: the selected span and its detail panel."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st
from turnlens.dashboard import charts, common
from turnlens.kernel import contract

SPAN_PARAM = "span"  # ?span=<span_id>: the selected span, so a pasted link opens on it
SPAN_TABS = ["Attributes", "Events", "Where and when"]  # the selected span's tables, one drawn at a time


def selected_span(picked: Any, bars: pd.DataFrame, marks: pd.DataFrame) -> str | None:
    """The span to detail: the one clicked, else the one in the URL, else the first commit that stood.

    A commit after the stop is the usual reason an SRE opens the turn, so it is selected on arrival.
    """
    clicked = _clicked(picked)
    if clicked:
        st.query_params[SPAN_PARAM] = clicked
        return clicked
    wanted = st.query_params.get(SPAN_PARAM)
    if wanted in set(bars["span_id"]):
        return str(wanted)
    if wanted:
        st.warning(
            f"No span `{wanted}` in this turn; showing the first commit instead.", icon=":material/help:"
        )
    commits = marks[marks["mark"].isin([charts.COMMIT_AFTER_STOP, charts.COMMIT])]
    if len(commits):  # the tool's own commit before the third party's ack, the ones after the stop first
        first = commits.assign(
            _late=commits["mark"] != charts.COMMIT_AFTER_STOP,
            _ack=commits["event"] != contract.EV_TOOL_COMMITTED,
        ).sort_values(["_late", "_ack", "at_ms"])
        return str(first["span_id"].iloc[0])
    return str(bars["span_id"].iloc[0]) if len(bars) else None


def _clicked(picked: Any) -> str | None:
    selection = getattr(picked, "selection", None) or {}
    points = selection.get("span") if hasattr(selection, "get") else None
    if isinstance(points, list) and points and isinstance(points[0], dict):
        value = points[0].get("span_id")
        return str(value) if value else None
    return None


def span_detail(spans: pd.DataFrame, bars: pd.DataFrame, span_id: str | None) -> None:
    """Everything one span says: where and when it ran, its attributes and its events, times as UTC.

    One line says where and when; the attributes, the events and every fact are tabs of which only the
    chosen one is drawn (three tables side by side were a good part of the page's cost in the browser)."""
    if span_id is None:
        common.empty("No spans in this turn.")
        return
    span = spans[spans["span_id"] == span_id].iloc[0]
    bar = bars[bars["span_id"] == span_id].iloc[0]
    st.markdown(f"**Selected span** `{span['name']}` · {bar['duration']} · click another bar to change it")
    status = str(span["status_code"])
    if isinstance(span["status_message"], str) and span["status_message"]:
        status += f" ({span['status_message']})"
    facts = {
        "layer": span["layer"],
        "node": span["node"],
        "service": span["service_name"],
        "kind": span["kind"],
        "status": status,
        "starts (HLC)": common.format_hlc(span["hlc"]),
        "starts (wall clock)": common.format_ms(span["start_time_unix_nano"] / 1e6),
        "duration": bar["duration"],
        "span id": span_id,
        "parent": span["parent_span_id"] if isinstance(span["parent_span_id"], str) else "— (root)",
        "trace": span["trace_id"],
    }
    attributes = _json(span["attributes"])
    events = list(span["events"]) if span["events"] is not None else []
    st.caption(
        f"{span['layer']} layer · node `{span['node']}` · {status} · starts {facts['starts (HLC)']} (HLC) · "
        f"{len(attributes)} attributes · {len(events)} events"
    )
    shown, tab = common.lazy_tabs(SPAN_TABS, key="span_tab")
    with tab:
        if shown == SPAN_TABS[0]:
            _table({"attribute": list(attributes), "value": [_text(k, v) for k, v in attributes.items()]})
        elif shown == SPAN_TABS[1]:
            _events_table(events)
        else:
            _table({"field": list(facts), "value": [str(v) for v in facts.values()]})


def _table(columns: dict[str, list[Any]]) -> None:
    st.dataframe(pd.DataFrame(columns), hide_index=True, width="stretch")


def _events_table(events: list[dict[str, Any]]) -> None:
    if not events:
        st.caption("This span logged no events.")
        return
    _table(
        {
            "event": [e["name"] for e in events],
            "at (HLC, UTC)": [common.format_hlc(e["hlc"])[11:] for e in events],
            "attributes": [
                ", ".join(
                    f"{k}={_text(k, v)}" for k, v in _json(e["attributes"]).items() if k != contract.HLC
                )
                for e in events
            ],
        }
    )


def _json(text: Any) -> dict[str, Any]:
    if not isinstance(text, str) or not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"(unparsed)": text}
    return value if isinstance(value, dict) else {"(value)": value}


def _text(key: str, value: Any) -> str:
    """An attribute's value as text; the HLC as its time and logical counter, not a 60-bit number."""
    if key == contract.HLC and isinstance(value, int):
        return common.format_hlc(value)
    return value if isinstance(value, str) else json.dumps(value)
