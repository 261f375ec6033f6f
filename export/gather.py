"""The incident export's data: the incident's turns found, every section's query run, one Incident object.

The incident's turns are found by `export/sql/select_incident_turns.sql`; every section is one of the turn
queries of `queries/turn/` (the same the Turn detail page and `turnlens query NAME_of_turn` run) over those
turns, held once (turn_queries.hold). The renderers (`html_report`, `markdown_report`,
`json_report`) only format an Incident. The helpers at the end say what every format shows first (the
headline, the verdict matrix) and how a value reads for people.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import duckdb
import pandas as pd
from turnlens.alerts.history import load_history
from turnlens.kernel.contract import LAYERS, format_hlc
from turnlens.queries import turn_queries
from turnlens.queries.sqlfiles import execute_script

EXPORT_SQL = Path(__file__).resolve().parent / "sql"
# Section key → (title, turn query of queries/turn/). Checked against turn_queries.load() by the tests.
SECTIONS: dict[str, tuple[str, str]] = {
    "summary": ("Summary", "summary"),
    "verdicts": ("What each layer believes", "verdicts"),
    "timeline": ("Timeline (HLC order)", "timeline"),
    "ledger": ("Side-effect ledger", "side_effects"),
    "findings": ("Findings", "findings"),
    "skew": ("Clock skew per node", "skew"),
    "events": ("Appendix: raw events", "span_events"),
}
SCOPE_SQL = "select_incident_turns.sql"
CATALOG_PATH_SQL = "select_catalog_path.sql"
ALERT_LOOKAHEAD = timedelta(minutes=30)  # rules with `for` fire after the incident they are about
Format = Literal["html", "md", "json"]


class ExportError(ValueError):
    """The scope names nothing in the store, or the arguments do not name a scope."""


# --- values as a reviewer reads them ---------------------------------------------------------------


def utc_text(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def is_hlc(column: str) -> bool:
    return column == "hlc" or column.endswith("_hlc")


def is_ns(column: str) -> bool:
    return column.endswith("_ns") or column.endswith("_unix_nano")


def display(column: str, value: Any) -> str:
    """A cell for people: HLCs and nanosecond times as UTC text, floats rounded, nulls blank."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and is_hlc(column) and value > 0:
        return format_hlc(value)
    if isinstance(value, int) and is_ns(column) and value > 0:
        return utc_text(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    if isinstance(value, list | tuple):
        return ", ".join(display(column, v) for v in value)
    return str(value)


def jsonable(column: str, value: Any) -> Any:
    """JSON keeps the raw value and adds the readable time beside HLC and nanosecond columns."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, float) and pd.isna(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(column, v) for v in value]
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


def _fetch(cursor: duckdb.DuckDBPyConnection) -> tuple[list[str], list[dict]]:
    columns = [d[0] for d in cursor.description]
    return columns, [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def _store_dir(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The store a catalog connection belongs to (the catalog file sits at the store's top)."""
    row = con.execute(_sql(CATALOG_PATH_SQL)).fetchone()
    return Path(row[0]).parent if row and row[0] else None


def _finding_groups(sections: dict[str, Section]) -> set[tuple[str, str]]:
    """(kind, tool) of each finding of the turns, as the grouped finding alerts label them."""
    findings, ledger = sections.get("findings"), sections.get("ledger")
    if findings is None or findings.unavailable is not None:
        return set()
    ledger_rows = [] if ledger is None or ledger.unavailable else ledger.rows
    tools = {r.get("tool_call_id"): r.get("tool_name") for r in ledger_rows}
    return {(str(r.get("kind")), str(tools.get(r.get("tool_call_id")) or "unknown")) for r in findings.rows}


def _overlapping_alerts(
    store: Path | None, turns: list[dict[str, Any]], findings: set[tuple[str, str]] | None = None
) -> list[dict[str, Any]]:
    """Alerts (from the runner's history) about these turns, or without a turn and active during them. A
    grouped finding alert (labelled with a finding kind, and a tool, but no turn) is about these turns when
    they have a finding of that kind and tool while it fired."""
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
        began = datetime.fromisoformat(life["startsAt"]).timestamp()
        ended = datetime.fromisoformat(life["endsAt"]).timestamp() if life["endsAt"] else float("inf")
        overlapped = began <= end and ended >= start
        if "turn_id" in labels:
            relevant = (labels.get("session_id"), labels["turn_id"]) in keys or (
                "session_id" not in labels and labels["turn_id"] in {k[1] for k in keys}
            )
        elif "session_id" in labels:
            relevant = labels["session_id"] in sessions
        elif "kind" in labels:
            relevant = overlapped and any(
                kind == labels["kind"] and tool == labels.get("tool_name", tool)
                for kind, tool in findings or ()
            )
        else:
            relevant = overlapped
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
    # The named turn's traces (else every trace) for the scope query, then the found turns held once for the
    # sections: one turn is read, not the store.
    _, turns = _fetch(
        execute_script(
            con,
            _sql(SCOPE_SQL),
            {
                "session": session_id,
                "turn": turn_id,
                "start_ns": scope["start_ns"],
                "end_ns": scope["end_ns"],
            },
        )
    )
    if not turns:
        raise ExportError(
            f"no turn in the store matches {', '.join(f'{k}={v}' for k, v in scope.items() if v)}"
        )
    answers = turn_queries.run_all(
        con,
        [t["session_id"] for t in turns],
        [t["turn_id"] for t in turns],
        [name for _, name in SECTIONS.values()],
        _fetch,
    )
    sections = {}
    for key, (title, name) in SECTIONS.items():
        section = Section(key=key, title=title)
        answer = answers[name]
        if isinstance(answer, duckdb.CatalogException):
            section.unavailable = f"this store's catalog cannot answer it yet ({str(answer).splitlines()[0]})"
        elif isinstance(answer, duckdb.Error):
            section.unavailable = f"the view's columns differ from what the export expects: {answer}"
        else:
            section.columns, section.rows = answer
        sections[key] = section
    _add_receipt_or_undo(sections["ledger"])
    alerts = _overlapping_alerts(store_dir or _store_dir(con), turns, _finding_groups(sections))
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
                ", ".join(f"{r['node']} {display('ms', r['max_skew_ms'])} ms ({r['note']})" for r in skewed)
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


def section_cells(section: Section, wanted: list[str] | None = None) -> tuple[list[str], list[list[str]]]:
    """What a table of the section shows: the columns of `wanted` it has (all of them without a list), and
    each row's cells as people read them (`display`). The HTML and Markdown reports both draw from this."""
    columns = [c for c in wanted if c in section.columns] if wanted else section.columns
    return columns, [[display(c, row.get(c)) for c in columns] for row in section.rows]


def alert_rows(alerts: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    columns = ["alertname", "severity", "startsAt", "endsAt", "summary"]
    return columns, [
        [str(a.get(c) or ("still firing" if c == "endsAt" else "")) for c in columns] for a in alerts
    ]
