"""The incident export as one self-contained HTML page: inline CSS, charts as inline SVG, nothing from the
network. Every value from span data is HTML-escaped where it is written."""

from __future__ import annotations

import html
from typing import Any

import pandas as pd
from turnlens.export.gather import (
    Incident,
    Section,
    alert_rows,
    display,
    headline,
    section_cells,
    verdict_matrix,
)

from turnlens import __version__

MAX_CHARTS = 12  # a long session gets swimlanes for its first turns, tables for all

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1200px;
 color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:12px}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4;position:sticky;top:0}tr:nth-child(even) td{background:#fafafa}
td{white-space:nowrap}td.wrap{white-space:normal;min-width:20em}
#ledger td,#findings td,#ledger th,#findings th{white-space:normal;overflow-wrap:anywhere}
#ledger,#findings{width:100%}
td.json{font-family:ui-monospace,monospace;white-space:pre-wrap;max-width:40em;word-break:break-all}
.sev-critical{color:#b00020;font-weight:bold}.sev-warning{color:#a15c00;font-weight:bold}
.note{color:#666;font-style:italic}.chart{overflow-x:auto;margin:.5em 0}
.scroll{overflow-x:auto}footer{margin-top:3em;color:#888;font-size:12px}
@media print{body{margin:0;max-width:none}.scroll,.chart{overflow:visible}table{font-size:10px}}
"""


_PROSE = {"evidence", "detail", "summary", "description", "layers", "nodes"}  # columns that wrap


def _table_html(
    columns: list[str], rows: list[list[str]], *, css_id: str = "", classes: dict[str, str] | None = None
) -> str:
    # headers may break after an underscore, so a wide table's column names do not force it off the page
    head = "".join(f"<th>{html.escape(c).replace('_', '_<wbr>')}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for column, cell in zip(columns, row, strict=True):
            css = (classes or {}).get(column, "wrap" if column in _PROSE else "")
            if column == "severity":
                css = f"sev-{cell}"
            cells.append(
                f'<td class="{css}">{html.escape(cell)}</td>' if css else f"<td>{html.escape(cell)}</td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    ident = f' id="{css_id}"' if css_id else ""
    table = f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def _swimlanes_svg(incident: Incident) -> list[tuple[str, str]]:
    """(turn, SVG) per turn: the dashboard's swimlane rendered to static SVG by vl-convert."""
    section = incident.sections["timeline"]
    if section.unavailable or not section.rows:
        return []
    try:
        import vl_convert
        from turnlens.export import timeline as charts
    except ImportError as exc:
        return [("", f'<p class="note">swimlane unavailable: {html.escape(str(exc))}</p>')]
    frame = pd.DataFrame(section.rows, columns=section.columns)
    out = []
    for turn in incident.turns[:MAX_CHARTS]:
        events = frame[(frame["session_id"] == turn["session_id"]) & (frame["turn_id"] == turn["turn_id"])]
        if events.empty:
            continue
        # the dashboard's default window: the stretch around the tool calls and the stop, not the whole turn
        window = charts.action_window(charts.timeline_frame(events))
        chart = charts.swimlane(events, width=900, window=window)
        out.append((turn["turn_id"], vl_convert.vegalite_to_svg(chart.to_dict())))
    return out


_HTML_COLUMNS = {
    "summary": [
        "session_id",
        "turn_id",
        "status",
        "cancel_origin",
        "started_at",
        "started_hlc",
        "ended_hlc",
        "duration_ms",
        "tokens_streamed",
        "tool_calls",
        "side_effects",
        "findings",
        "ordering",
        "nodes",
    ],
    "timeline": [
        "turn_id",
        "seq",
        "wall_seq",
        "order_hlc",
        "hlc_source",
        "wall_ns",
        "offset_ms",
        "layer",
        "node",
        "source",
        "name",
        "tool_call_id",
        "tool_name",
        "cancel_origin",
        "finish_reason",
        "third_party_status",
        "skew_ms",
    ],
    "ledger": [
        "turn_id",
        "tool_call_id",
        "tool_name",
        "tier",
        "dispatch",
        "idempotency_key",
        "status",
        "dispatched_hlc",
        "prepared_hlc",
        "committed_hlc",
        "compensated_hlc",
        "discarded_hlc",
        "receipt_hlc",
        "approval_granted_hlc",
        "third_party_acks",
        "third_party_status",
        "charges",
        "partial_stored",
        "receipt_or_undo",
    ],
}


def render_html(incident: Incident) -> str:
    parts = [f"<h1>turnlens incident report</h1><p>{'<br>'.join(map(html.escape, headline(incident)))}</p>"]
    summary = incident.sections["summary"]
    parts.append("<h2>Summary</h2>")
    parts.append(_section_html(summary))
    columns, matrix = verdict_matrix(incident)
    parts.append(
        '<h2>The five layers side by side</h2><p class="note">What each layer believes happened in each '
        "turn: where they disagree, the logs contradict each other.</p>"
    )
    parts.append(
        incident.sections["verdicts"].unavailable
        and _unavailable(incident.sections["verdicts"])
        or _table_html(columns, matrix, css_id="verdict-matrix")
    )
    parts.append("<h2>Timeline (HLC order)</h2>")
    for turn_id, svg in _swimlanes_svg(incident):
        parts.append(f'<div class="chart" data-turn="{html.escape(turn_id)}">{svg}</div>')
    parts.append(_section_html(incident.sections["timeline"], css_id="timeline"))
    for key in ("ledger", "findings"):
        parts.append(f"<h2>{html.escape(incident.sections[key].title)}</h2>")
        parts.append(_section_html(incident.sections[key], css_id=key))
    parts.append("<h2>Alerts that overlapped</h2>")
    parts.append(_alerts_html(incident.alerts))
    parts.append("<h2>Clock skew per node</h2>")
    parts.append(_section_html(incident.sections["skew"], css_id="skew"))
    parts.append("<h2>Appendix: raw events</h2>")
    parts.append(_section_html(incident.sections["events"], css_id="raw-events", json_columns={"attributes"}))
    footer = (
        f"<footer>Generated {html.escape(display('at', incident.generated_at))} by turnlens {__version__}. "
        "Times are UTC; HLC values read as UTC physical time + logical counter.</footer>"
    )
    title = html.escape(headline(incident)[0])
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_CSS}</style></head><body>{''.join(parts)}{footer}</body></html>"
    )


def _unavailable(section: Section) -> str:
    return f'<p class="note">{html.escape(section.title)}: {html.escape(section.unavailable or "")}</p>'


def _section_html(section: Section, *, css_id: str = "", json_columns: set[str] | None = None) -> str:
    """The section as a table; the main sections show the columns a reviewer reads (JSON has them all)."""
    if section.unavailable:
        return _unavailable(section)
    if not section.rows:
        return '<p class="note">none</p>'
    columns, rows = section_cells(section, _HTML_COLUMNS.get(section.key))
    classes = {c: "json" for c in json_columns or ()}
    return _table_html(columns, rows, css_id=css_id, classes=classes)


def _alerts_html(alerts: list[dict[str, Any]]) -> str:
    if not alerts:
        return '<p class="note">none recorded by `turnlens alerts run` for this incident</p>'
    columns, rows = alert_rows(alerts)
    return _table_html(columns, rows, css_id="alerts")


