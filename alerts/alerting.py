"""Evaluates the alert rule files at a given time, keeps each alert's state in the store, and notifies.

A rule is a SQL file in `alerts/rules/` returning one row per firing instance (its labels); this
module reads its header, runs it with the evaluation time bound as a parameter, moves every alert
through pending → firing → resolved (honouring `for` across runs, fingerprinted by labels) and tells
the notifiers only what changed, except Alertmanager, which expects firing alerts to be re-sent.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import sys
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import duckdb
from turnlens.kernel import layout
from turnlens.kernel.contract import HLC_LOGICAL_BITS, HLC_LOGICAL_MASK
from turnlens.kernel.durations import parse_duration, parse_time
from turnlens.queries.catalog import CatalogError, load_views, read_order

ALERTS_DIR = Path(__file__).resolve().parent / "rules"
STATE_FOLDER = layout.ALERTS_DIR  # DIR/alerts/ of the store, beside the segments, never inside the catalog
STATE_FILE = "state.json"
HISTORY_FILE = "history.jsonl"  # every firing/resolved transition, read by the incident export
SEVERITIES = ("critical", "warning", "info")
EXIT_OK, EXIT_WARNING, EXIT_CRITICAL, EXIT_ERROR = 0, 1, 2, 3
RESOLVED_RETENTION = timedelta(minutes=15)  # Prometheus re-sends resolved alerts this long
RESERVED_LABELS = ("alertname", "severity")
# The parameters a rule may use; only those its SQL names are bound (DuckDB rejects extra ones).
PARAMETERS = ("at", "at_ms", "at_hlc")
ANNOTATION_PREFIX = "annotation_"  # a column `annotation_evidence` is annotation `evidence`, not a label

_HEADER_KEY = re.compile(r"^--\s?(\w+):\s?(.*)$")
_CONTINUATION = re.compile(r"^--\s{3,}(.*)$")
_PARAM = re.compile(r"\$(\w+)")
_TEMPLATE = re.compile(r"\{(\w+)\}")
_IDENTIFIER = re.compile(r"\b([a-z_][a-z0-9_]*)\b")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class RuleError(Exception):
    """A rule file is malformed: missing header keys, a bad severity or duration, an unknown parameter."""


# --- rules ----------------------------------------------------------------------------------------


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
    except ValueError as exc:
        raise RuleError(f"{path}: {exc}") from exc
    labels: dict[str, str] = {}
    for pair in filter(None, (p.strip() for p in keys.get("labels", "").split(","))):
        label, _, value = pair.partition("=")
        if not _LABEL_NAME.match(label.strip()) or not value.strip() or label.strip() in RESERVED_LABELS:
            raise RuleError(f"{path}: bad static label {pair!r} (want name=value, not alertname/severity)")
        labels[label.strip()] = value.strip()
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


@dataclass(frozen=True)
class Instance:
    """One row of a rule at one evaluation: the alert's full label set and its annotations."""

    labels: dict[str, str]
    annotations: dict[str, str]
    value: str | None

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.labels)


def fingerprint(labels: Mapping[str, str]) -> str:
    """Stable identity of an alert: a hash of its sorted label set."""
    canonical = json.dumps(sorted(labels.items()), separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def evaluate(con: duckdb.DuckDBPyConnection, rule: Rule, at: datetime) -> list[Instance]:
    """Runs the rule at `at`: every column becomes a label (nulls left out) except `value` and
    `annotation_*` columns, which become annotations; all of them fill `{name}` in summary/description."""
    cursor = con.execute(rule.sql, bind_parameters(rule, at))
    columns = [d[0] for d in cursor.description]
    instances = []
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
        labels = {"alertname": rule.name, "severity": rule.severity, **rule.labels}
        labels.update(
            {k: _label_value(v) for k, v in record.items() if v is not None and k not in RESERVED_LABELS}
        )
        values = {**labels, **extra, "value": value or ""}
        annotations = {
            **extra,
            "summary": _render(rule.summary, values),
            "description": _render(rule.description, values),
            "runbook": _render(rule.runbook, values),
        }
        if value is not None:
            annotations["value"] = value
        instances.append(Instance(labels=labels, annotations=annotations, value=value))
    fingerprints = [i.fingerprint for i in instances]
    if len(set(fingerprints)) != len(fingerprints):  # as Prometheus: one alert per label set
        raise RuleError(
            f"{rule.path.name} returned several rows with the same labels; add a distinguishing column"
        )
    return instances


# --- state ----------------------------------------------------------------------------------------


@dataclass
class Alert:
    """One alert's life across runs, stored in DIR/alerts/state.json."""

    fingerprint: str
    rule: str
    labels: dict[str, str]
    annotations: dict[str, str]
    state: str  # pending / firing / resolved
    active_at: str  # first evaluation at which the rule returned it
    fired_at: str | None = None
    resolved_at: str | None = None
    last_seen: str | None = None

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "info")


@dataclass(frozen=True)
class Transition:
    """What a notifier hears about: an alert that started firing or resolved at this evaluation."""

    status: str  # firing / resolved
    alert: Alert


@dataclass
class AlertState:
    """Every alert known to the store, keyed by fingerprint, and when the rules were last evaluated."""

    alerts: dict[str, Alert] = field(default_factory=dict)
    evaluated_at: str | None = None

    @classmethod
    def load(cls, path: Path) -> AlertState:
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        alerts = {fp: Alert(**a) for fp, a in data.get("alerts", {}).items()}
        return cls(alerts=alerts, evaluated_at=data.get("evaluated_at"))

    def save(self, path: Path) -> None:
        """Written to a temporary file, fsynced, renamed: a reader or a crash sees old or new, never half."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        payload = {
            "version": 1,
            "evaluated_at": self.evaluated_at,
            "alerts": {fp: asdict(a) for fp, a in sorted(self.alerts.items())},
        }
        with open(tmp, "w") as handle:
            json.dump(payload, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def firing(self) -> list[Alert]:
        return [a for a in self.alerts.values() if a.state == "firing"]

    def step(self, rule: Rule, instances: Iterable[Instance], at: datetime) -> list[Transition]:
        """Advances the rule's alerts to `at`: new rows go pending (or fire at once when `for` is 0),
        pending ones fire once active for `for`, firing ones that vanished resolve, pending ones that
        vanished are forgotten, resolved ones are dropped after RESOLVED_RETENTION."""
        now = iso(at)
        transitions: list[Transition] = []
        seen: set[str] = set()
        for instance in instances:
            fp = instance.fingerprint
            seen.add(fp)
            alert = self.alerts.get(fp)
            if alert is None or alert.state == "resolved":
                alert = Alert(
                    fingerprint=fp,
                    rule=rule.name,
                    labels=instance.labels,
                    annotations=instance.annotations,
                    state="pending",
                    active_at=now,
                )
                self.alerts[fp] = alert
            alert.annotations = instance.annotations
            alert.last_seen = now
            if alert.state == "pending" and at - parse_time(alert.active_at) >= rule.for_:
                alert.state, alert.fired_at = "firing", now
                transitions.append(Transition("firing", alert))
        for fp, alert in list(self.alerts.items()):
            if alert.rule != rule.name or fp in seen:
                continue
            if alert.state == "pending":
                del self.alerts[fp]
            elif alert.state == "firing":
                alert.state, alert.resolved_at = "resolved", now
                transitions.append(Transition("resolved", alert))
            elif alert.resolved_at and at - parse_time(alert.resolved_at) > RESOLVED_RETENTION:
                del self.alerts[fp]
        return transitions

    def forget_rules_except(self, names: set[str], at: datetime) -> list[Transition]:
        """Alerts of rules that no longer exist resolve (firing) or vanish (pending)."""
        transitions = []
        for fp, alert in list(self.alerts.items()):
            if alert.rule in names:
                continue
            if alert.state == "firing":
                alert.state, alert.resolved_at = "resolved", iso(at)
                transitions.append(Transition("resolved", alert))
            else:
                del self.alerts[fp]
        return transitions


@contextlib.contextmanager
def locked_state(store_dir: Path, state_path: Path | None = None) -> Iterator[Path]:
    """Holds DIR/alerts/.lock for one run so two schedulers never interleave; yields the state file."""
    folder = store_dir / STATE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RuntimeError(f"another `turnlens alerts run` holds {folder / '.lock'}") from exc
        try:
            yield state_path or folder / STATE_FILE
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# --- payloads -------------------------------------------------------------------------------------

ZERO_TIME = "0001-01-01T00:00:00Z"  # what Alertmanager's webhook writes as endsAt of a firing alert


def alert_record(transition: Transition, generator_url: str = "") -> dict[str, Any]:
    """One alert as Alertmanager's webhook lists it (also the JSON Lines record of stdout / file:)."""
    alert = transition.alert
    return {
        "status": transition.status,
        "labels": dict(alert.labels),
        "annotations": dict(alert.annotations),
        "startsAt": alert.fired_at or alert.active_at,
        "endsAt": alert.resolved_at if transition.status == "resolved" and alert.resolved_at else ZERO_TIME,
        "generatorURL": generator_url,
        "fingerprint": alert.fingerprint,
    }


def webhook_payloads(transitions: list[Transition], receiver: str = "turnlens") -> list[dict[str, Any]]:
    """Alertmanager webhook payloads (version 4), one group per alert name, as Alertmanager groups by it."""
    groups: dict[str, list[Transition]] = {}
    for t in transitions:
        groups.setdefault(t.alert.labels["alertname"], []).append(t)
    payloads = []
    for name, members in sorted(groups.items()):
        alerts = [alert_record(t) for t in members]
        common_labels = _common([a["labels"] for a in alerts])
        payloads.append(
            {
                "version": "4",
                "groupKey": f'{{}}:{{alertname="{name}"}}',
                "truncatedAlerts": 0,
                "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
                "receiver": receiver,
                "groupLabels": {"alertname": name},
                "commonLabels": common_labels,
                "commonAnnotations": _common([a["annotations"] for a in alerts]),
                "externalURL": "",
                "alerts": alerts,
            }
        )
    return payloads


def _common(dicts: list[dict[str, str]]) -> dict[str, str]:
    first, *rest = dicts
    return {k: v for k, v in first.items() if all(d.get(k) == v for d in rest)}


def alertmanager_alerts(state: AlertState, at: datetime, resend: timedelta) -> list[dict[str, Any]]:
    """`POST /api/v2/alerts` body: every firing alert again (endsAt a little ahead, so Alertmanager
    keeps it alive until the next run) and every recently resolved one with its endsAt."""
    body = []
    for alert in sorted(state.alerts.values(), key=lambda a: a.fingerprint):
        if alert.state == "firing":
            ends = iso(at + resend)
        elif alert.state == "resolved" and alert.resolved_at:
            ends = alert.resolved_at
        else:
            continue
        body.append(
            {
                "labels": dict(alert.labels),
                "annotations": dict(alert.annotations),
                "startsAt": alert.fired_at or alert.active_at,
                "endsAt": ends,
            }
        )
    return body


# --- notifiers ------------------------------------------------------------------------------------


def _post_json(url: str, payload: Any, timeout: float = 10.0) -> None:
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "turnlens-alerts"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        response.read()


def notify(
    target: str,
    transitions: list[Transition],
    state: AlertState,
    at: datetime,
    resend: timedelta,
    stdout: TextIO | None = None,
) -> None:
    """Sends this evaluation's news to one `--notify` target; raises on a target it cannot reach."""
    kind, _, where = target.partition(":")
    if kind == "stdout":
        out = stdout or sys.stdout
        for t in transitions:
            out.write(json.dumps(alert_record(t), sort_keys=True) + "\n")
        out.flush()
    elif kind == "file":
        if not where:
            raise ValueError("file: needs a path, e.g. file:/var/log/turnlens-alerts.jsonl")
        with open(where, "a") as handle:
            for t in transitions:
                handle.write(json.dumps(alert_record(t), sort_keys=True) + "\n")
    elif kind == "webhook":
        for payload in webhook_payloads(transitions):
            _post_json(where, payload)
    elif kind == "alertmanager":
        body = alertmanager_alerts(state, at, resend)
        if body:
            _post_json(where.rstrip("/") + "/api/v2/alerts", body)
    else:
        raise ValueError(
            f"unknown notify target {target!r} (stdout, file:PATH, webhook:URL, alertmanager:URL)"
        )


def check_target(target: str) -> None:
    """Rejects a malformed `--notify` before anything is evaluated."""
    kind, _, where = target.partition(":")
    if kind == "stdout" and not where:
        return
    if kind == "file" and where:
        return
    if kind in ("webhook", "alertmanager") and where.startswith(("http://", "https://")):
        return
    raise ValueError(f"bad notify target {target!r}: use stdout, file:PATH, webhook:URL or alertmanager:URL")


# --- one run --------------------------------------------------------------------------------------


@dataclass
class RunResult:
    """What one evaluation did: transitions, rule errors, the alerts now firing, and the exit code."""

    at: datetime
    transitions: list[Transition]
    errors: list[str]
    firing: list[Alert]

    @property
    def exit_code(self) -> int:
        if self.errors:
            return EXIT_ERROR
        severities = {a.severity for a in self.firing}
        if "critical" in severities:
            return EXIT_CRITICAL
        if "warning" in severities:
            return EXIT_WARNING
        return EXIT_OK


def append_history(state_path: Path, transitions: list[Transition]) -> None:
    """Appends each transition to history.jsonl beside the state file (DIR/alerts/ by default), one
    short line each with O_APPEND, so the incident export can show the alerts that overlapped."""
    if not transitions:
        return
    path = state_path.with_name(HISTORY_FILE)
    lines = "".join(json.dumps(alert_record(t), sort_keys=True) + "\n" for t in transitions)
    with open(path, "a") as handle:
        handle.write(lines)
        handle.flush()
        os.fsync(handle.fileno())


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


def run_once(
    con: duckdb.DuckDBPyConnection,
    rules: list[Rule],
    state: AlertState,
    at: datetime,
) -> RunResult:
    """Evaluates every rule at `at` and advances `state`; a rule that fails leaves its alerts as they were."""
    transitions: list[Transition] = []
    errors: list[str] = []
    for rule in rules:
        try:
            instances = evaluate(con, rule, at)
        except (duckdb.Error, RuleError) as exc:
            errors.append(f"{rule.name} ({rule.path.name}): {exc}")
            continue
        transitions.extend(state.step(rule, instances, at))
    transitions.extend(state.forget_rules_except({r.name for r in rules}, at))
    state.evaluated_at = iso(at)
    return RunResult(at=at, transitions=transitions, errors=errors, firing=state.firing())


def load_history(store_dir: Path) -> list[dict[str, Any]]:
    """Every recorded transition of the store's alerts, oldest first; empty when none ran."""
    path = store_dir / STATE_FOLDER / HISTORY_FILE
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line cut by a crash is skipped
            records.append(json.loads(line))
    return records
