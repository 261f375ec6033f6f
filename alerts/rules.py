"""Alert rules: reading the rule files of `alerts/rules/` and evaluating one at a time.

A rule is a SQL file returning rows; its header says how to page on them (name, severity, `for`, summary,
description, runbook, static labels, and `group_by`). Evaluating binds the evaluation time as the parameters
the rule names and turns the rows into Instances: labels, annotations, a value. Without `group_by` each row is
one alert; with it, the rows sharing the values of those columns are one alert, as Alertmanager groups: it
carries their count and the worst few rows (the rule's first, in its own order) as examples linking to their
turns on the dashboard.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import duckdb
from turnlens.kernel.contract import HLC_LOGICAL_BITS, HLC_LOGICAL_MASK
from turnlens.kernel.durations import format_duration, parse_duration, parse_time
from turnlens.queries.catalog import CatalogError, load_views, read_order

__all__ = ["format_duration", "parse_duration", "parse_time"]  # the kernel's, used by the rules here
ALERTS_DIR = Path(__file__).resolve().parent / "rules"
SEVERITIES = ("critical", "warning", "info")
RESERVED_LABELS = ("alertname", "severity")
# The parameters a rule may use; only those its SQL names are bound (DuckDB rejects extra ones).
PARAMETERS = ("at", "at_ms", "at_hlc")
ANNOTATION_PREFIX = "annotation_"  # a column `annotation_evidence` is annotation `evidence`, not a label
EXAMPLES = 3  # rows a grouped alert shows, the rule's first (its worst, by its own `order by`)
# Where alert links point: `turnlens dashboard`'s default address; `alerts run --dashboard-url` overrides it.
DASHBOARD_URL = "http://127.0.0.1:8501"
TURN_PAGE = "turn"  # the dashboard's Turn detail page (its url_path), opened on ?session=…&turn=…
ALERTS_PAGE = "alerts"

_HEADER_KEY = re.compile(r"^--\s?(\w+):\s?(.*)$")
_CONTINUATION = re.compile(r"^--\s{3,}(.*)$")
_PARAM = re.compile(r"\$(\w+)")
_TEMPLATE = re.compile(r"\{(\w+)\}")
_IDENTIFIER = re.compile(r"\b([a-z_][a-z0-9_]*)\b")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class RuleError(Exception):
    """A rule file is malformed: missing header keys, a bad severity or duration, an unknown parameter."""


def iso(moment: datetime) -> str:
    """RFC 3339 in UTC with milliseconds, as Alertmanager writes it."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Rule:
    """One alert rule file: its SQL and the header that says how to page on its rows."""

    name: str
    path: Path
    sql: str
    grain: str
    severity: str
    for_: timedelta
    summary: str
    description: str
    runbook: str
    labels: dict[str, str] = field(default_factory=dict)  # static labels, e.g. priority=P2
    parameters: tuple[str, ...] = ()
    keep_firing_for: timedelta = timedelta(0)  # a firing alert whose rows vanished fires on this long
    group_by: tuple[str, ...] | None = None  # None: one alert per row; else one per value of these columns
    example: str = ""  # one line per row of a grouped alert; empty: the row's own labels

    @property
    def grouped(self) -> bool:
        return self.group_by is not None


def parse_rule(path: Path) -> Rule:
    """Reads a rule file's header (`-- key: value`, continued by `--     more`) and checks it."""
    sql = path.read_text()
    header = [line for line in sql.splitlines() if line.startswith("--")]
    if not header:
        raise RuleError(f"{path}: no header comment")
    grain = header[0].removeprefix("--").strip()
    keys: dict[str, str] = {}
    last: str | None = None
    for line in header[1:]:
        continued = _CONTINUATION.match(line)
        if continued and last:
            keys[last] = f"{keys[last]}\n{continued.group(1).rstrip()}".strip()
            continue
        match = _HEADER_KEY.match(line)
        if match:
            last = match.group(1).lower()
            keys[last] = match.group(2).strip()
    missing = [k for k in ("name", "severity", "for", "summary", "description", "runbook") if not keys.get(k)]
    if missing:
        raise RuleError(f"{path}: header lacks {', '.join(missing)}")
    if keys["severity"] not in SEVERITIES:
        raise RuleError(f"{path}: severity {keys['severity']!r} is not one of {', '.join(SEVERITIES)}")
    if not _LABEL_NAME.match(keys["name"]):
        raise RuleError(f"{path}: name {keys['name']!r} is not a valid alert name")
    try:
        for_ = parse_duration(keys["for"])
        keep_firing_for = parse_duration(keys.get("keep_firing_for") or "0s")
    except ValueError as exc:
        raise RuleError(f"{path}: {exc}") from exc
    labels: dict[str, str] = {}
    for pair in filter(None, (p.strip() for p in keys.get("labels", "").split(","))):
        label, _, value = pair.partition("=")
        if not _LABEL_NAME.match(label.strip()) or not value.strip() or label.strip() in RESERVED_LABELS:
            raise RuleError(f"{path}: bad static label {pair!r} (want name=value, not alertname/severity)")
        labels[label.strip()] = value.strip()
    group_by: tuple[str, ...] | None = None
    if "group_by" in keys:
        group_by = tuple(filter(None, (c.strip() for c in keys["group_by"].split(","))))
        bad = [c for c in group_by if not _LABEL_NAME.match(c) or c in RESERVED_LABELS or c == "value"]
        if bad or len(set(group_by)) != len(group_by):
            raise RuleError(f"{path}: bad group_by {keys['group_by']!r} (want distinct column names)")
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    used = tuple(sorted(set(_PARAM.findall(body))))
    unknown = [p for p in used if p not in PARAMETERS]
    if unknown:
        raise RuleError(
            f"{path}: unknown parameter(s) ${', $'.join(unknown)}; rules may use ${', $'.join(PARAMETERS)}"
        )
    if not body.strip():
        raise RuleError(f"{path}: no SQL after the header")
    return Rule(
        name=keys["name"],
        path=path,
        sql=body.strip().rstrip(";"),
        grain=grain,
        severity=keys["severity"],
        for_=for_,
        summary=keys["summary"],
        description=keys["description"],
        runbook=keys["runbook"],
        labels=labels,
        parameters=used,
        keep_firing_for=keep_firing_for,
        group_by=group_by,
        example=keys.get("example", ""),
    )


def load_rules(rules_dir: Path = ALERTS_DIR) -> list[Rule]:
    """Every rule of `rules_dir` in its `_order`, checked both ways; names must be unique."""
    try:
        names = read_order(rules_dir)
    except (CatalogError, FileNotFoundError) as exc:
        raise RuleError(str(exc)) from exc
    rules = [parse_rule(rules_dir / name) for name in names]
    seen: dict[str, Path] = {}
    for rule in rules:
        if rule.name in seen:
            raise RuleError(f"{rule.path}: alert name {rule.name} is already used by {seen[rule.name]}")
        seen[rule.name] = rule.path
    return rules


# --- evaluation -----------------------------------------------------------------------------------


def bind_parameters(rule: Rule, at: datetime) -> dict[str, Any]:
    """The evaluation time as each form a rule may use: `$at` a TIMESTAMP in UTC, `$at_ms` Unix ms,
    `$at_hlc` the largest packed HLC of that millisecond (so `hlc <= $at_hlc` keeps the whole ms)."""
    at_ms = int(at.timestamp() * 1000)
    naive_utc = at.astimezone(UTC).replace(tzinfo=None)  # views' timestamps are naive UTC
    values = {"at": naive_utc, "at_ms": at_ms, "at_hlc": (at_ms << HLC_LOGICAL_BITS) | HLC_LOGICAL_MASK}
    return {name: values[name] for name in rule.parameters}


def _label_value(value: Any) -> str:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _render(template: str, values: Mapping[str, str]) -> str:
    return _TEMPLATE.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def turn_link(dashboard_url: str, session_id: str, turn_id: str) -> str:
    """The dashboard's Turn detail page of one turn, as an absolute URL a pager can open."""
    return f"{dashboard_url.rstrip('/')}/{TURN_PAGE}?{urlencode({'session': session_id, 'turn': turn_id})}"


@dataclass(frozen=True)
class Instance:
    """One alert of a rule at one evaluation: its full label set, annotations, a value, and for a grouped
    rule how many rows it stands for and the worst few of them (`line`, `session_id`, `turn_id`, `url`)."""

    labels: dict[str, str]
    annotations: dict[str, str]
    value: str | None
    count: int | None = None  # a grouped rule's rows behind this alert; None for one alert per row
    examples: tuple[dict[str, str], ...] = ()

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.labels)


def fingerprint(labels: Mapping[str, str]) -> str:
    """Stable identity of an alert: a hash of its sorted label set."""
    canonical = json.dumps(sorted(labels.items()), separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class _Row:
    labels: dict[str, str]  # every non-null column but value and annotation_* (alertname etc. not included)
    extra: dict[str, str]  # annotation_* columns, prefix removed
    value: str | None

    def values(self, base: Mapping[str, str]) -> dict[str, str]:
        return {**base, **self.labels, **self.extra, "value": self.value or ""}


def _rows(con: duckdb.DuckDBPyConnection, rule: Rule, at: datetime) -> list[_Row]:
    cursor = con.execute(rule.sql, bind_parameters(rule, at))
    columns = [d[0] for d in cursor.description]
    rows = []
    for row in cursor.fetchall():
        record = dict(zip(columns, row, strict=True))
        raw_value = record.pop("value", None)
        notes = {k: record.pop(k) for k in columns if k.startswith(ANNOTATION_PREFIX)}
        extra = {
            k.removeprefix(ANNOTATION_PREFIX): _label_value(v) for k, v in notes.items() if v is not None
        }
        value = (
            None
            if raw_value is None
            else _label_value(round(raw_value, 3) if isinstance(raw_value, float) else raw_value)
        )
        labels = {k: _label_value(v) for k, v in record.items() if v is not None and k not in RESERVED_LABELS}
        rows.append(_Row(labels=labels, extra=extra, value=value))
    return rows


def _annotations(rule: Rule, values: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    annotations = {
        **extra,
        "summary": _render(rule.summary, values),
        "description": _render(rule.description, values),
        "runbook": _render(rule.runbook, values),
    }
    if values.get("value"):
        annotations["value"] = values["value"]
    return annotations


def _example(rule: Rule, row: _Row, base: Mapping[str, str], dashboard_url: str) -> dict[str, str]:
    hidden = set(rule.group_by or ())
    line = (
        _render(rule.example, row.values(base))
        if rule.example
        else ", ".join(f"{k}={v}" for k, v in row.labels.items() if k not in hidden)
    )
    example = {"line": line}
    session_id, turn_id = row.labels.get("session_id"), row.labels.get("turn_id")
    if session_id and turn_id:
        url = turn_link(dashboard_url, session_id, turn_id)
        example.update(session_id=session_id, turn_id=turn_id, url=url)
    return example


def _group(
    rule: Rule, rows: Sequence[_Row], base: Mapping[str, str], dashboard_url: str
) -> Instance:
    """The rows sharing one value of the rule's group_by columns as one alert: labels those columns,
    templates filled from them, `{count}` and the worst (first) row; the first EXAMPLES rows as examples."""
    worst = rows[0]
    keys = rule.group_by or ()
    labels = {**base, **{k: worst.labels[k] for k in keys if k in worst.labels}}
    count = str(len(rows))
    value = worst.value if worst.value is not None else count
    values = {**worst.values(base), **labels, "count": count, "value": value}
    examples = tuple(_example(rule, row, base, dashboard_url) for row in rows[:EXAMPLES])
    annotations = _annotations(rule, values, worst.extra)
    annotations["count"] = count
    annotations["examples"] = "\n".join(
        f"{e['line']} {e['url']}" if e.get("url") else e["line"] for e in examples
    )
    if len(rows) > EXAMPLES:
        annotations["examples"] += f"\n… and {len(rows) - EXAMPLES} more"
    if examples and examples[0].get("url"):
        annotations["turn_url"] = examples[0]["url"]  # the worst turn, for a pager's one link
    return Instance(labels=labels, annotations=annotations, value=value, count=len(rows), examples=examples)


def evaluate(
    con: duckdb.DuckDBPyConnection, rule: Rule, at: datetime, dashboard_url: str = DASHBOARD_URL
) -> list[Instance]:
    """Runs the rule at `at`: every column becomes a label (nulls left out) except `value` and
    `annotation_*` columns, which become annotations; all of them fill `{name}` in summary/description.
    With `group_by`, only those columns are labels and the rows sharing them are one alert (_group)."""
    rows = _rows(con, rule, at)
    base = {"alertname": rule.name, "severity": rule.severity, **rule.labels}
    if rule.grouped:
        groups: dict[tuple[str | None, ...], list[_Row]] = {}
        for row in rows:  # in the rule's order: the first row of a group is its worst
            groups.setdefault(tuple(row.labels.get(k) for k in rule.group_by or ()), []).append(row)
        return [_group(rule, members, base, dashboard_url) for members in groups.values()]
    instances = []
    for row in rows:
        labels = {**base, **row.labels}
        values = row.values(labels)
        annotations = _annotations(rule, values, row.extra)
        instances.append(Instance(labels=labels, annotations=annotations, value=row.value))
    fingerprints = [i.fingerprint for i in instances]
    if len(set(fingerprints)) != len(fingerprints):  # as Prometheus: one alert per label set
        raise RuleError(
            f"{rule.path.name} returned several rows with the same labels; add a distinguishing column"
        )
    return instances


def snapshot_shared_views(con: duckdb.DuckDBPyConnection, rules: list[Rule]) -> list[str]:
    """Materialises, once per evaluation, each catalog view that two or more rules read, as a temporary
    table of the same name (temp objects shadow the catalog's): fourteen finding rules then share one
    computation of `divergences`, and every rule sees the same snapshot. Returns the names."""
    views = {view.name for view in load_views()}  # the catalog is built from these files
    readers: dict[str, int] = {}
    for rule in rules:
        for name in views & set(_IDENTIFIER.findall(rule.sql)):
            readers[name] = readers.get(name, 0) + 1
    shared = sorted(name for name, count in readers.items() if count > 1)
    for name in shared:  # DDL takes no parameters; the name comes from the catalog's own view list
        con.execute(f"create or replace temp table {name} as select * from main.{name}")
    return shared
