"""The incident export: one turn, a session or a time range as a self-contained HTML, Markdown or JSON file.

Reviewers read it without turnlens: HTML carries its charts as inline SVG and nothing from the
network; Markdown pastes into a ticket; JSON carries the same sections for machines. Data comes from
the named queries in `export/sql/`; the swimlane is the dashboard's own chart (dashboard/charts.py).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import duckdb
import pandas as pd
from turnlens.alerts.alerting import load_history
from turnlens.kernel.contract import LAYERS, format_hlc
from turnlens.queries.catalog import connect, execute_script

from turnlens import __version__

EXPORT_SQL = Path(__file__).resolve().parent / "sql"
# Section key → (title, query file). Checked both ways against the folder by the tests.
SECTIONS: dict[str, tuple[str, str]] = {
    "summary": ("Summary", "select_incident_summary.sql"),
    "verdicts": ("What each layer believes", "select_incident_verdicts.sql"),
    "timeline": ("Timeline (HLC order)", "select_incident_timeline.sql"),
    "ledger": ("Side-effect ledger", "select_incident_ledger.sql"),
    "findings": ("Findings", "select_incident_findings.sql"),
    "skew": ("Clock skew per node", "select_incident_skew.sql"),
    "events": ("Appendix: raw events", "select_incident_events.sql"),
}
SCOPE_SQL = "select_incident_turns.sql"
TRACES_SQL = "set_incident_traces.sql"  # every query above reads only the traces this holds
KEY_TRACES_SQL = "add_incident_key_traces.sql"  # and those sharing the turns' keys (for the findings)
CATALOG_PATH_SQL = "select_catalog_path.sql"
ALERT_LOOKAHEAD = timedelta(minutes=30)  # rules with `for` fire after the incident they are about
MAX_CHARTS = 12  # a long session gets swimlanes for its first turns, tables for all
Format = Literal["html", "md", "json"]


class ExportError(ValueError):
    """The scope names nothing in the store, or the arguments do not name a scope."""


# --- values as a reviewer reads them ---------------------------------------------------------------


def utc_text(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _is_hlc(column: str) -> bool:
    return column == "hlc" or column.endswith("_hlc")


def _is_ns(column: str) -> bool:
    return column.endswith("_ns") or column.endswith("_unix_nano")


def display(column: str, value: Any) -> str:
    """A cell for people: HLCs and nanosecond times as UTC text, floats rounded, nulls blank."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and _is_hlc(column) and value > 0:
        return format_hlc(value)
    if isinstance(value, int) and _is_ns(column) and value > 0:
        return utc_text(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    if isinstance(value, list | tuple):
        return ", ".join(display(column, v) for v in value)
    return str(value)


def _jsonable(column: str, value: Any) -> Any:
    """JSON keeps the raw value and adds the readable time beside HLC and nanosecond columns."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, float) and pd.isna(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(column, v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


# --- gathering -------------------------------------------------------------------------------------


@dataclass
class Section:
    """One part of the report: its rows, or why it has none (a view this catalog lacks)."""

    key: str
    title: str
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    unavailable: str | None = None


@dataclass
class Incident:
    """Everything an export shows, gathered once and rendered three ways."""

    scope: dict[str, Any]
    turns: list[dict[str, Any]]
    sections: dict[str, Section]
    alerts: list[dict[str, Any]]
    generated_at: datetime


def _sql(name: str) -> str:
    return (EXPORT_SQL / name).read_text()


def _rows(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any]) -> tuple[list[str], list[dict]]:
    cursor = execute_script(con, _sql(name), params)
    columns = [d[0] for d in cursor.description]
    return columns, [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def _store_dir(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The store a catalog connection belongs to (the catalog file sits at the store's top)."""
    row = con.execute(_sql(CATALOG_PATH_SQL)).fetchone()
    return Path(row[0]).parent if row and row[0] else None


def _overlapping_alerts(store: Path | None, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Alerts (from the runner's history) about these turns, or without a turn and active during them."""
    if store is None or not turns:
        return []
    start = min(t["first_ns"] for t in turns) / 1e9
    end = max(t["last_ns"] for t in turns) / 1e9 + ALERT_LOOKAHEAD.total_seconds()
    keys = {(t["session_id"], t["turn_id"]) for t in turns}
    sessions = {t["session_id"] for t in turns}
    lives: dict[str, dict[str, Any]] = {}
    for record in load_history(store):
        life = lives.setdefault(
            record["fingerprint"],
            {
                "alertname": record["labels"].get("alertname"),
                "severity": record["labels"].get("severity"),
                "labels": record["labels"],
                "summary": record["annotations"].get("summary", ""),
                "startsAt": record["startsAt"],
                "endsAt": None,
            },
        )
        if record["status"] == "firing":
            life.update(startsAt=record["startsAt"], endsAt=None)
        else:
            life["endsAt"] = record["endsAt"]
    chosen = []
    for life in lives.values():
        labels = life["labels"]
        if "turn_id" in labels:
            relevant = (labels.get("session_id"), labels["turn_id"]) in keys or (
                "session_id" not in labels and labels["turn_id"] in {k[1] for k in keys}
            )
        elif "session_id" in labels:
            relevant = labels["session_id"] in sessions
        else:
            began = datetime.fromisoformat(life["startsAt"]).timestamp()
            ended = datetime.fromisoformat(life["endsAt"]).timestamp() if life["endsAt"] else float("inf")
            relevant = began <= end and ended >= start
        if relevant:
            chosen.append(life)
    return sorted(chosen, key=lambda a: (a["startsAt"], a["alertname"] or ""))


def _add_receipt_or_undo(ledger: Section) -> None:
    """What the user was told of each committed call: undone, shown with a receipt, or nothing."""
    if ledger.unavailable or "committed_hlc" not in ledger.columns:
        return
    for row in ledger.rows:
        if not row.get("committed_hlc"):
            row["receipt_or_undo"] = "nothing committed"
        elif row.get("compensated_hlc"):
            row["receipt_or_undo"] = "undone (compensated)"
        elif row.get("receipt_hlc"):
            row["receipt_or_undo"] = "receipt shown to the user"
        else:
            row["receipt_or_undo"] = "NEITHER: committed, not undone, never shown"
    ledger.columns.append("receipt_or_undo")


def gather(
    con: duckdb.DuckDBPyConnection,
    *,
    session_id: str | None = None,
    turn_id: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    store_dir: Path | None = None,
) -> Incident:
    """Finds the incident's turns, then runs every section's query over them."""
    if session_id is None and (start is None or end is None):
        raise ExportError("name a session (and optionally a turn), or a time range with both start and end")
    if turn_id is not None and session_id is None:
        raise ExportError("a turn is named within its session: give session_id too")
    to_ns = lambda t: None if t is None else int(t.astimezone(UTC).timestamp() * 1e9)  # noqa: E731
    scope = {"session_id": session_id, "turn_id": turn_id, "start_ns": to_ns(start), "end_ns": to_ns(end)}
    # The named turn's traces (else every trace) for the scope query, then the found turns' traces and those
    # sharing their idempotency keys for the sections: one turn is read, not the store.
    named = None if turn_id is None else [turn_id]
    execute_script(con, _sql(TRACES_SQL), {"turns": named})
    _, turns = _rows(
        con,
        SCOPE_SQL,
        {"session": session_id, "turn": turn_id, "start_ns": scope["start_ns"], "end_ns": scope["end_ns"]},
    )
    if not turns:
        raise ExportError(
            f"no turn in the store matches {', '.join(f'{k}={v}' for k, v in scope.items() if v)}"
        )
    keys = {"sessions": [t["session_id"] for t in turns], "turns": [t["turn_id"] for t in turns]}
    execute_script(con, _sql(TRACES_SQL), {"turns": keys["turns"]})
    execute_script(con, _sql(KEY_TRACES_SQL), {})
    sections = {}
    for key, (title, file) in SECTIONS.items():
        section = Section(key=key, title=title)
        try:
            section.columns, section.rows = _rows(con, file, keys)
        except duckdb.CatalogException as exc:
            section.unavailable = f"this store's catalog cannot answer it yet ({str(exc).splitlines()[0]})"
        except duckdb.BinderException as exc:
            section.unavailable = f"the view's columns differ from what the export expects: {exc}"
        sections[key] = section
    _add_receipt_or_undo(sections["ledger"])
    alerts = _overlapping_alerts(store_dir or _store_dir(con), turns)
    return Incident(
        scope=scope, turns=turns, sections=sections, alerts=alerts, generated_at=datetime.now(UTC)
    )


# --- what every format shows first ----------------------------------------------------------------


def headline(incident: Incident) -> list[str]:
    """The summary sentences: what the scope is, how many findings of which severity, what fired."""
    scope = incident.scope
    if scope["turn_id"]:
        what = f"turn {scope['turn_id']} of session {scope['session_id']}"
    elif scope["session_id"]:
        what = f"session {scope['session_id']} ({len(incident.turns)} turns)"
    else:
        between = f"{utc_text(scope['start_ns'])} and {utc_text(scope['end_ns'])}"
        what = f"{len(incident.turns)} turns between {between}"
    first = min(t["first_ns"] for t in incident.turns)
    last = max(t["last_ns"] for t in incident.turns)
    lines = [f"Incident: {what}, from {utc_text(first)} to {utc_text(last)} (UTC)."]
    findings = incident.sections["findings"]
    if findings.unavailable is None:
        by_severity: dict[str, int] = {}
        for row in findings.rows:
            by_severity[str(row.get("severity"))] = by_severity.get(str(row.get("severity")), 0) + 1
        counts = ", ".join(f"{n} {s}" for s, n in sorted(by_severity.items())) or "none"
        kinds = sorted({str(r.get("kind")) for r in findings.rows})
        lines.append(
            f"Findings: {len(findings.rows)} ({counts})" + (f": {', '.join(kinds)}." if kinds else ".")
        )
    ledger = incident.sections["ledger"]
    if ledger.unavailable is None:
        committed = [r for r in ledger.rows if r.get("committed_hlc")]
        lines.append(f"Tool calls: {len(ledger.rows)}, of which {len(committed)} committed a change outside.")
    skew = incident.sections["skew"]
    if skew.unavailable is None:
        skewed = [r for r in skew.rows if r.get("note") not in (None, "within tolerance")]
        lines.append(
            "Clock skew: "
            + (
                ", ".join(
                    f"{r['node']} {display('ms', r['max_abs_skew_ms'])} ms ({r['note']})" for r in skewed
                )
                or "every node within tolerance"
            )
            + "."
        )
    lines.append(f"Alerts that overlapped: {len(incident.alerts)}.")
    return lines


def verdict_matrix(incident: Incident) -> tuple[list[str], list[list[str]]]:
    """Turns down, the five layers across: each cell what that layer believes happened in that turn."""
    section = incident.sections["verdicts"]
    present = {str(r.get("layer")) for r in section.rows}
    layers = [layer for layer in LAYERS if layer in present or layer != "billing"]
    cells: dict[tuple[str, str], list[str]] = {}
    for row in section.rows:
        text = str(row.get("verdict") if "verdict" in row else row.get("belief", ""))
        cells.setdefault((str(row["turn_id"]), str(row.get("layer"))), []).append(text)
    matrix = [
        [t["turn_id"], *(" / ".join(cells.get((t["turn_id"], layer), ["—"])) for layer in layers)]
        for t in incident.turns
    ]
    return ["turn", *layers], matrix


# --- HTML ------------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1200px;
 color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:12px}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4;position:sticky;top:0}tr:nth-child(even) td{background:#fafafa}
td{white-space:nowrap}td.wrap{white-space:normal;min-width:20em}
td.json{font-family:ui-monospace,monospace;white-space:pre-wrap;max-width:40em;word-break:break-all}
.sev-critical{color:#b00020;font-weight:bold}.sev-warning{color:#a15c00;font-weight:bold}
.note{color:#666;font-style:italic}.chart{overflow-x:auto;margin:.5em 0}
.scroll{overflow-x:auto}footer{margin-top:3em;color:#888;font-size:12px}
"""


_PROSE = {"evidence", "detail", "summary", "description", "layers", "nodes"}  # columns that wrap


def _table_html(
    columns: list[str], rows: list[list[str]], *, css_id: str = "", classes: dict[str, str] | None = None
) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
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
        from turnlens.dashboard import charts
    except ImportError as exc:
        return [("", f'<p class="note">swimlane unavailable: {html.escape(str(exc))}</p>')]
    frame = pd.DataFrame(section.rows, columns=section.columns)
    out = []
    for turn in incident.turns[:MAX_CHARTS]:
        events = frame[(frame["session_id"] == turn["session_id"]) & (frame["turn_id"] == turn["turn_id"])]
        if events.empty:
            continue
        chart = charts.swimlane(events, width=900)
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
    wanted = _HTML_COLUMNS.get(section.key)
    columns = [c for c in wanted if c in section.columns] if wanted else section.columns
    rows = [[display(c, row.get(c)) for c in columns] for row in section.rows]
    classes = {c: "json" for c in json_columns or ()}
    return _table_html(columns, rows, css_id=css_id, classes=classes)


def _alerts_html(alerts: list[dict[str, Any]]) -> str:
    if not alerts:
        return '<p class="note">none recorded by `turnlens alerts run` for this incident</p>'
    columns, rows = _alert_rows(alerts)
    return _table_html(columns, rows, css_id="alerts")


def _alert_rows(alerts: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    columns = ["alertname", "severity", "startsAt", "endsAt", "summary"]
    return columns, [
        [str(a.get(c) or ("still firing" if c == "endsAt" else "")) for c in columns] for a in alerts
    ]


# --- Markdown --------------------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def _md_table(columns: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(map(_md_cell, columns)) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _md_section(section: Section, columns: list[str] | None = None) -> str:
    if section.unavailable:
        return f"_{section.title}: {section.unavailable}_"
    if not section.rows:
        return "_none_"
    shown = [c for c in (columns or section.columns) if c in section.columns]
    return _md_table(shown, [[display(c, row.get(c)) for c in shown] for row in section.rows])


# The columns a ticket needs; the JSON and HTML carry them all.
_MD_COLUMNS = {
    "summary": [
        "turn_id",
        "status",
        "cancel_origin",
        "started_hlc",
        "ended_hlc",
        "duration_ms",
        "tokens_streamed",
        "tool_calls",
        "side_effects",
        "findings",
        "ordering",
    ],
    "timeline": ["turn_id", "seq", "order_hlc", "wall_ns", "layer", "node", "name", "tool_name", "skew_ms"],
    "ledger": [
        "turn_id",
        "tool_call_id",
        "tool_name",
        "tier",
        "dispatch",
        "idempotency_key",
        "status",
        "dispatched_hlc",
        "committed_hlc",
        "compensated_hlc",
        "receipt_hlc",
        "third_party_status",
    ],
    "findings": ["turn_id", "kind", "severity", "tool_call_id", "detected_hlc", "evidence"],
    "events": ["turn_id", "hlc", "wall_ns", "layer", "node", "name", "attributes"],
}


def render_markdown(incident: Incident) -> str:
    out = ["# turnlens incident report", "", *[f"- {line}" for line in headline(incident)], ""]
    out += ["## Summary", "", _md_section(incident.sections["summary"], _MD_COLUMNS["summary"]), ""]
    columns, matrix = verdict_matrix(incident)
    out += [
        "## The five layers side by side",
        "",
        _md_section(incident.sections["verdicts"])
        if incident.sections["verdicts"].unavailable
        else _md_table(columns, matrix),
        "",
    ]
    out += [
        "## Timeline (HLC order)",
        "",
        _md_section(incident.sections["timeline"], _MD_COLUMNS["timeline"]),
        "",
    ]
    out += ["## Side-effect ledger", "", _md_section(incident.sections["ledger"], _MD_COLUMNS["ledger"]), ""]
    out += ["## Findings", "", _md_section(incident.sections["findings"], _MD_COLUMNS["findings"]), ""]
    alerts = _md_table(*_alert_rows(incident.alerts)) if incident.alerts else "_none recorded_"
    out += ["## Alerts that overlapped", "", alerts, ""]
    out += ["## Clock skew per node", "", _md_section(incident.sections["skew"]), ""]
    out += [
        "<details><summary>Appendix: raw events</summary>",
        "",
        _md_section(incident.sections["events"], _MD_COLUMNS["events"]),
        "",
        "</details>",
        "",
    ]
    out.append(
        f"_Generated {display('at', incident.generated_at)} by turnlens {__version__}; times in UTC, "
        "HLC as UTC physical time + logical counter._"
    )
    return "\n".join(out) + "\n"


# --- JSON ------------------------------------------------------------------------------------------


def render_json(incident: Incident) -> str:
    def rows(section: Section) -> list[dict[str, Any]]:
        out = []
        for row in section.rows:
            record = {c: _jsonable(c, row.get(c)) for c in section.columns}
            for c in section.columns:
                value = row.get(c)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    if _is_hlc(c):
                        record[f"{c}_text"] = format_hlc(value)
                    elif _is_ns(c):
                        record[f"{c}_utc"] = utc_text(value)
            out.append(record)
        return out

    columns, matrix = verdict_matrix(incident)
    document = {
        "format": "turnlens.incident/1",
        "generated_at": display("at", incident.generated_at),
        "turnlens_version": __version__,
        "scope": {k: v for k, v in incident.scope.items() if v is not None},
        "headline": headline(incident),
        "turns": [
            {**t, "first_utc": utc_text(t["first_ns"]), "last_utc": utc_text(t["last_ns"])}
            for t in incident.turns
        ],
        "verdict_matrix": {"columns": columns, "rows": matrix},
        "sections": {
            key: (
                {"title": s.title, "unavailable": s.unavailable}
                if s.unavailable
                else {"title": s.title, "columns": s.columns, "rows": rows(s)}
            )
            for key, s in incident.sections.items()
        },
        "alerts": incident.alerts,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


RENDERERS: dict[str, Callable[[Incident], str]] = {
    "html": render_html,
    "md": render_markdown,
    "json": render_json,
}


def export_incident(
    store: Path | str | duckdb.DuckDBPyConnection,
    *,
    session_id: str | None = None,
    turn_id: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    fmt: Format = "html",
) -> str:
    """The incident file's text. `store` is a store directory (opened read-only) or a catalog connection.

    Scope: `session_id` (with `turn_id` for one turn), or `start` and `end` for every turn with a span
    between them.
    """
    if fmt not in RENDERERS:
        raise ExportError(f"format {fmt!r} is not one of {', '.join(RENDERERS)}")
    if isinstance(store, duckdb.DuckDBPyConnection):
        incident = gather(store, session_id=session_id, turn_id=turn_id, start=start, end=end)
    else:
        con = connect(Path(store))
        try:
            incident = gather(
                con, session_id=session_id, turn_id=turn_id, start=start, end=end, store_dir=Path(store)
            )
        finally:
            con.close()
    return RENDERERS[fmt](incident)
