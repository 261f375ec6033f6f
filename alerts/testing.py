"""Given-rows → expected-alerts tests for alert rules, like `promtool test rules`, in TOML.

A test file names a rule and lists cases. Each case gives rows that stand in for the views the rule
reads (registered under the view names in an in-memory DuckDB), then evaluates the rule at a series
of times through the same state machine as `alerts run`, so `for` is tested too:

    rule = "cancel_to_ack_p99.sql"        # relative to the test file

    [[cases]]
    name = "one slow cancel pages after a minute"
    [cases.given]
    cancel_acks = [
      { turn_id = "t1", requested_hlc = "hlc:2026-01-01T00:00:30Z", cancel_to_ack_ms = 900.0 },
    ]
    [[cases.evals]]
    at = 2026-01-01T00:00:40Z
    pending = [{}]                        # one alert, labels beyond the rule's own: none
    [[cases.evals]]
    at = 2026-01-01T00:01:40Z
    firing = [{}]

Expected alerts list the labels an alert has (alertname, severity and the rule's static labels are
added; for a grouped rule, its group_by columns); the comparison is exact. An expected alert may also give
`annotations = { count = "2" }`: those annotations must be the alert's (the others are not compared).
A string `"hlc:<ISO time>"` in given rows becomes the packed HLC of that instant; TOML date-times become
timestamps.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from turnlens.alerts.alerting import run_once
from turnlens.alerts.rules import Rule, parse_rule
from turnlens.alerts.state import AlertState
from turnlens.kernel.contract import pack_hlc


@dataclass
class CaseResult:
    """The outcome of one case: its name and, when it failed, what differed at which evaluation."""

    name: str
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("hlc:"):
        moment = datetime.fromisoformat(value.removeprefix("hlc:"))
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        return pack_hlc(int(moment.timestamp() * 1000), 0)
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows as an Arrow table: every key of every row is a column; ints widen to floats where mixed."""
    names: list[str] = []
    for row in rows:
        names.extend(k for k in row if k not in names)
    columns = {}
    for name in names:
        values = [_cell(row.get(name)) for row in rows]
        if any(isinstance(v, float) for v in values):
            values = [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in values]
        columns[name] = values
    return pa.table(columns)


def _label_sets(alerts: list[dict[str, str]]) -> list[str]:
    return sorted(", ".join(f"{k}={v}" for k, v in sorted(a.items())) for a in alerts)


def _when(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    moment = datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def run_case(rule: Rule, case: dict[str, Any]) -> CaseResult:
    """Registers the case's given rows under their view names and checks each evaluation in turn."""
    result = CaseResult(name=str(case.get("name", "unnamed case")))
    con = duckdb.connect()
    try:
        for view, rows in case.get("given", {}).items():
            if not rows:
                result.failures.append(
                    f"given.{view} is empty: give at least one row (columns come from rows)"
                )
                return result
            con.register(view, _table(rows))
        state = AlertState()
        base = {"alertname": rule.name, "severity": rule.severity, **rule.labels}
        for step in case.get("evals", []):
            at = _when(step["at"])
            run = run_once(con, [rule], state, at)
            if run.errors:
                result.failures.append(f"at {at.isoformat()}: rule failed: {'; '.join(run.errors)}")
                continue
            for status in ("firing", "pending"):
                wanted = [
                    {**base, **{k: str(v) for k, v in a.items() if k != "annotations"}}
                    for a in step.get(status, [])
                ]
                alerts = [a for a in state.alerts.values() if a.state == status]
                expected, got = _label_sets(wanted), _label_sets([a.labels for a in alerts])
                if expected != got:
                    result.failures.append(
                        f"at {at.isoformat()}: {status}\n      expected: {expected}\n      got:      {got}"
                    )
                    continue
                by_labels = {_label_sets([a.labels])[0]: a for a in alerts}
                for labels, spec in zip(wanted, step.get(status, []), strict=True):
                    notes = {k: str(v) for k, v in spec.get("annotations", {}).items()}
                    alert = by_labels[_label_sets([labels])[0]]
                    got_notes = {k: alert.annotations.get(k) for k in notes}
                    differ = {k: v for k, v in got_notes.items() if v != notes[k]}
                    if differ:
                        result.failures.append(
                            f"at {at.isoformat()}: {status} {_label_sets([labels])[0]}: annotations\n"
                            f"      expected: { {k: notes[k] for k in differ} }\n      got:      {differ}"
                        )
    finally:
        con.close()
    return result


def run_test_file(path: Path) -> tuple[Rule, list[CaseResult]]:
    """Loads a test file and its rule, and runs every case."""
    spec = tomllib.loads(path.read_text())
    if "rule" not in spec or not spec.get("cases"):
        raise ValueError(f'{path}: a test file needs `rule = "file.sql"` and at least one [[cases]]')
    rule = parse_rule((path.parent / spec["rule"]).resolve())
    return rule, [run_case(rule, case) for case in spec["cases"]]
