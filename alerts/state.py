"""Alert state: every alert's life across runs (pending, firing, resolved) and what is still to be told.

The state lives in DIR/alerts/state.json and is rewritten whole (temporary file, fsync, rename). Besides the
alerts it holds an outbox per notification target: the alert records that target has not yet acknowledged.
News is put in the outbox and saved before anything is sent, and leaves it only once delivered, so a target
that is down hears everything at its next successful run: delivery is at least once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from turnlens.alerts.rules import Instance, Rule, iso
from turnlens.kernel import layout
from turnlens.kernel.durations import parse_time

STATE_FOLDER = layout.ALERTS_DIR  # DIR/alerts/ of the store, beside the segments, never inside the catalog
STATE_FILE = "state.json"
RESOLVED_RETENTION = timedelta(minutes=15)  # Prometheus re-sends resolved alerts this long
REPEAT_INTERVAL = timedelta(hours=4)  # a firing alert is told again after this long (Alertmanager's default)
OUTBOX_LIMIT = 10_000  # undelivered records kept per target; beyond it the oldest are dropped (and said so)


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
    count: int | None = None  # a grouped rule's rows behind it at the last evaluation; None: one row
    examples: list[dict[str, str]] = field(default_factory=list)  # the worst few rows (rules.Instance)
    notified_at: str | None = None  # when its firing was last told to the notifiers (repeat interval)

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
    as_of: str | None = None  # what the last run's `--at` named: now (the wall clock), newest, a time
    # notify target -> alert records (notify.alert_record) it has not acknowledged yet, oldest first
    outbox: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> AlertState:
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        alerts = {fp: Alert(**a) for fp, a in data.get("alerts", {}).items()}
        return cls(
            alerts=alerts,
            evaluated_at=data.get("evaluated_at"),
            as_of=data.get("as_of"),
            outbox=data.get("outbox", {}),
        )

    def save(self, path: Path) -> None:
        """Written to a temporary file, fsynced, renamed: a reader or a crash sees old or new, never half."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        payload = {
            "version": 1,
            "evaluated_at": self.evaluated_at,
            "as_of": self.as_of,
            "alerts": {fp: asdict(a) for fp, a in sorted(self.alerts.items())},
            "outbox": {target: records for target, records in sorted(self.outbox.items()) if records},
        }
        with open(tmp, "w") as handle:
            json.dump(payload, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def queue(self, targets: Iterable[str], records: list[dict[str, Any]]) -> list[str]:
        """Puts this run's news in the outbox of each target; forgets the outboxes of targets no longer
        given. Returns a warning per target whose outbox overflowed OUTBOX_LIMIT (oldest records dropped)."""
        targets = list(targets)
        self.outbox = {t: self.outbox.get(t, []) for t in targets}
        warnings = []
        for target in targets:
            box = self.outbox[target] + records
            if len(box) > OUTBOX_LIMIT:
                warnings.append(f"notify {target}: {len(box) - OUTBOX_LIMIT} undelivered record(s) dropped")
                box = box[-OUTBOX_LIMIT:]
            self.outbox[target] = box
        return warnings

    def firing(self) -> list[Alert]:
        return [a for a in self.alerts.values() if a.state == "firing"]

    def step(self, rule: Rule, instances: Iterable[Instance], at: datetime) -> list[Transition]:
        """Advances the rule's alerts to `at`: new rows go pending (or fire at once when `for` is 0),
        pending ones fire once active for `for`, firing ones that vanished resolve (once gone for the rule's
        keep_firing_for; back before that, they fire on unannounced), pending ones that vanished are
        forgotten, resolved ones are dropped after RESOLVED_RETENTION."""
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
            alert.count, alert.examples = instance.count, [dict(e) for e in instance.examples]
            alert.last_seen = now
            if alert.state == "pending" and at - parse_time(alert.active_at) >= rule.for_:
                alert.state, alert.fired_at, alert.notified_at = "firing", now, now
                transitions.append(Transition("firing", alert))
        for fp, alert in list(self.alerts.items()):
            if alert.rule != rule.name or fp in seen:
                continue
            if alert.state == "pending":
                del self.alerts[fp]
            elif alert.state == "firing":
                last_seen = parse_time(alert.last_seen or alert.fired_at or now)
                if at - last_seen < rule.keep_firing_for:  # as Prometheus' keep_firing_for: no flapping
                    continue
                alert.state, alert.resolved_at = "resolved", now
                transitions.append(Transition("resolved", alert))
            elif alert.resolved_at and at - parse_time(alert.resolved_at) > RESOLVED_RETENTION:
                del self.alerts[fp]
        return transitions

    def repeats(self, at: datetime, interval: timedelta) -> list[Transition]:
        """Alerts firing and untold for `interval`: told again (the notifiers' news, not a transition of the
        history), as Alertmanager repeats a group still firing after its repeat_interval."""
        due = []
        for alert in sorted(self.alerts.values(), key=lambda a: a.fingerprint):
            told = alert.notified_at or alert.fired_at
            if alert.state == "firing" and told and at - parse_time(told) >= interval:
                alert.notified_at = iso(at)
                due.append(Transition("firing", alert))
        return due

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
