"""One evaluation of the alert rules: every rule run at a given time, and the state advanced.

The work is split by job: `rules` (reading and evaluating rule files), `state` (each alert's life across runs
and the outbox of undelivered news), `notify` (payloads and delivery) and `history` (the transitions log).
This module runs them together for `turnlens alerts run` and keeps their public names importable from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import duckdb
from turnlens.alerts.history import HISTORY_FILE, append_history, load_history
from turnlens.alerts.notify import (
    ZERO_TIME,
    DeliveryError,
    alert_record,
    alertmanager_alerts,
    check_target,
    deliver,
    post_json,
    webhook_payloads,
)
from turnlens.alerts.rules import (
    ALERTS_DIR,
    ALERTS_PAGE,
    ANNOTATION_PREFIX,
    DASHBOARD_URL,
    PARAMETERS,
    RESERVED_LABELS,
    SEVERITIES,
    Instance,
    Rule,
    RuleError,
    bind_parameters,
    evaluate,
    fingerprint,
    iso,
    load_rules,
    parse_rule,
    snapshot_shared_views,
    turn_link,
)
from turnlens.alerts.state import (
    REPEAT_INTERVAL,
    RESOLVED_RETENTION,
    STATE_FILE,
    STATE_FOLDER,
    Alert,
    AlertState,
    Transition,
    locked_state,
)
from turnlens.kernel.durations import format_duration, parse_duration, parse_time

__all__ = [
    "ALERTS_DIR",
    "ALERTS_PAGE",
    "ANNOTATION_PREFIX",
    "DASHBOARD_URL",
    "EXIT_CRITICAL",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_WARNING",
    "HISTORY_FILE",
    "PARAMETERS",
    "REPEAT_INTERVAL",
    "RESERVED_LABELS",
    "RESOLVED_RETENTION",
    "SEVERITIES",
    "STATE_FILE",
    "STATE_FOLDER",
    "ZERO_TIME",
    "Alert",
    "AlertState",
    "DeliveryError",
    "Instance",
    "Rule",
    "RuleError",
    "RunResult",
    "Transition",
    "alert_record",
    "alertmanager_alerts",
    "append_history",
    "bind_parameters",
    "check_target",
    "deliver",
    "evaluate",
    "fingerprint",
    "format_duration",
    "iso",
    "load_history",
    "load_rules",
    "locked_state",
    "parse_duration",
    "parse_rule",
    "parse_time",
    "post_json",
    "run_once",
    "snapshot_shared_views",
    "turn_link",
    "webhook_payloads",
]

EXIT_OK, EXIT_WARNING, EXIT_CRITICAL, EXIT_ERROR = 0, 1, 2, 3


@dataclass
class RunResult:
    """What one evaluation did: transitions, rule errors, the alerts now firing, and the exit code;
    `repeats` are alerts still firing whose repeat interval passed (told again, not history)."""

    at: datetime
    transitions: list[Transition]
    errors: list[str]
    firing: list[Alert]
    repeats: list[Transition] = field(default_factory=list)

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


def run_once(
    con: duckdb.DuckDBPyConnection,
    rules: list[Rule],
    state: AlertState,
    at: datetime,
    recover: Callable[[BaseException], bool] | None = None,
    dashboard_url: str = DASHBOARD_URL,
    repeat_interval: timedelta = REPEAT_INTERVAL,
) -> RunResult:
    """Evaluates every rule at `at` and advances `state`; a rule that fails leaves its alerts as they were.

    `recover(error)` is asked after a rule fails on the store (quarantine.recover, for a segment that cannot
    be read); when it could repair something, the rule runs once more. `dashboard_url` is where the
    grouped alerts' links to turns point.
    """
    transitions: list[Transition] = []
    errors: list[str] = []
    for rule in rules:
        try:
            try:
                instances = evaluate(con, rule, at, dashboard_url)
            except duckdb.Error as exc:
                if recover is None or not recover(exc):
                    raise
                instances = evaluate(con, rule, at, dashboard_url)
        except (duckdb.Error, RuleError) as exc:
            errors.append(f"{rule.name} ({rule.path.name}): {exc}")
            continue
        transitions.extend(state.step(rule, instances, at))
    transitions.extend(state.forget_rules_except({r.name for r in rules}, at))
    repeats = state.repeats(at, repeat_interval)
    state.evaluated_at = iso(at)
    return RunResult(at=at, transitions=transitions, errors=errors, firing=state.firing(), repeats=repeats)
