"""`turnlens alerts run | test | list`: scheduled evaluation with exit codes a scheduler can act on."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
from turnlens.alerts import alerting, asof, notify
from turnlens.alerts.testing import run_test_file
from turnlens.collector import leases, quarantine
from turnlens.kernel import durations, stops
from turnlens.queries.catalog import CATALOG_FILE, connect

DASHBOARD_ENV = "TURNLENS_DASHBOARD_URL"


def register(subparsers: argparse._SubParsersAction) -> None:
    alerts = subparsers.add_parser("alerts", help="evaluate alert rules on a schedule; test rules")
    sub = alerts.add_subparsers(dest="alerts_command", metavar="ACTION", required=True)

    run = sub.add_parser(
        "run",
        help="evaluate every rule once (or every --every), keep state, notify",
        description="Exit codes: 0 nothing firing, 1 warning firing, 2 critical firing, 3 error.",
    )
    run.add_argument("--store", required=True, type=Path, help="the store directory")
    run.add_argument(
        "--rules", type=Path, default=alerting.ALERTS_DIR, help="folder of rule files with _order"
    )
    run.add_argument(
        "--at",
        help="evaluate as of this time instead of the wall clock: an ISO-8601 time, `newest` (the newest "
        "data in the store, for recorded data) or `newest-30m`; the dashboard's ?asof= takes the same",
    )
    run.add_argument(
        "--until", help="with --at and --every: step the evaluation time up to here (same forms), no waiting"
    )
    run.add_argument("--every", help="evaluate on this interval (e.g. 60s) until interrupted")
    run.add_argument(
        "--notify",
        action="append",
        metavar="TARGET",
        help="stdout (default), file:PATH, webhook:URL, alertmanager:URL; repeatable",
    )
    run.add_argument(
        "--notify-timeout",
        type=float,
        default=notify.POST_DEADLINE_S,
        metavar="SECONDS",
        help="deadline of each POST, connect to last byte of the answer (default %(default)s)",
    )
    run.add_argument(
        "--dashboard-url",
        default=os.environ.get(DASHBOARD_ENV, alerting.DASHBOARD_URL),
        metavar="URL",
        help=f"the dashboard the alerts link to (default ${DASHBOARD_ENV} or %(default)s)",
    )
    run.add_argument(
        "--repeat-interval",
        default=durations.format_duration(alerting.REPEAT_INTERVAL),
        metavar="DURATION",
        help="tell a still-firing alert again after this long (default %(default)s, as Alertmanager)",
    )
    run.add_argument(
        "--state",
        type=Path,
        help="alert state file (default DIR/alerts/state.json); give another for a replay",
    )
    run.set_defaults(func=cmd_run)

    test = sub.add_parser("test", help="run rule test files (given rows → expected alerts)")
    test.add_argument("files", nargs="+", type=Path, metavar="FILE")
    test.set_defaults(func=cmd_test)

    listing = sub.add_parser("list", help="print the rule catalogue")
    listing.add_argument("--rules", type=Path, default=alerting.ALERTS_DIR)
    listing.add_argument("--markdown", action="store_true", help="as a Markdown table")
    listing.set_defaults(func=cmd_list)


def _newest(store: Path) -> Callable[[], datetime | None]:
    def newest() -> datetime | None:
        with leases.reading(store):
            con = connect(store)
            try:
                return asof.newest_data(con)
            finally:
                con.close()

    return newest


def _schedule(
    args: argparse.Namespace, every: timedelta | None, interrupt: stops.Stops | None = None
) -> Iterator[datetime]:
    """Evaluation times: one (`--at` or now); `--at … --until … --every` steps a replay without
    waiting; `--every` alone follows the wall clock, sleeping between runs."""
    if args.at:
        newest = functools.cache(_newest(args.store))  # one look at the store for --at and --until
        at = asof.resolve(args.at, newest)
        until = asof.resolve(args.until, newest) if args.until else at
        step = every or timedelta(minutes=1)
        while at <= until:
            yield at
            at += step
        return
    while not (interrupt and interrupt.received is not None):
        started = time.monotonic()
        yield datetime.now(UTC)
        if every is None:
            return
        time.sleep(max(0.0, every.total_seconds() - (time.monotonic() - started)))


def cmd_run(args: argparse.Namespace) -> int:
    try:
        targets = args.notify or ["stdout"]
        for target in targets:
            alerting.check_target(target)
        every = durations.parse_duration(args.every) if args.every else None
        repeat = durations.parse_duration(args.repeat_interval)
        if args.until and not args.at:
            raise ValueError("--until needs --at")
        for given in (args.at, args.until):
            if given:
                asof.check(given)
        rules = alerting.load_rules(args.rules)
    except (ValueError, alerting.RuleError) as exc:
        print(f"turnlens alerts: {exc}", file=sys.stderr)
        return alerting.EXIT_ERROR
    if not (args.store / CATALOG_FILE).exists():
        print(f"turnlens alerts: no catalog at {args.store / CATALOG_FILE}", file=sys.stderr)
        return alerting.EXIT_ERROR
    resend = 4 * max(every or timedelta(minutes=1), timedelta(minutes=1))
    code = alerting.EXIT_OK
    # a Ctrl-C that DuckDB swallowed still ends an --every loop, and one that interrupted a query is no error
    interrupt = stops.Stops((signal.SIGINT,), lambda _signum: KeyboardInterrupt())
    try:
        with interrupt.installed(), alerting.locked_state(args.store, args.state) as state_path:
            state = alerting.AlertState.load(state_path)
            state.as_of = args.at or asof.NOW
            for at in _schedule(args, every, interrupt):
                if args.until:  # a replay: each step is as of its own time
                    state.as_of = alerting.iso(at)
                code = _evaluate(
                    args.store,
                    rules,
                    state,
                    state_path,
                    at,
                    targets,
                    resend,
                    args.notify_timeout,
                    Delivery(args.dashboard_url, repeat),
                )
    except KeyboardInterrupt:
        pass
    except (RuntimeError, asof.AsOfError, duckdb.Error) as exc:
        if interrupt.received is not None:  # the Ctrl-C interrupted a query
            return code
        print(f"turnlens alerts: {exc}", file=sys.stderr)
        return alerting.EXIT_ERROR
    return code


@dataclass(frozen=True)
class Delivery:
    """Where alerts link to, and how often a still-firing one is told again."""

    dashboard_url: str = alerting.DASHBOARD_URL
    repeat_interval: timedelta = alerting.REPEAT_INTERVAL


def _evaluate(
    store: Path,
    rules: list[alerting.Rule],
    state: alerting.AlertState,
    state_path: Path,
    at: datetime,
    targets: list[str],
    resend: timedelta,
    deadline_s: float = notify.POST_DEADLINE_S,
    delivery: Delivery = Delivery(),  # noqa: B008 - frozen, so one shared default is safe
) -> int:
    """One evaluation: rules, state saved, history appended, every target told. Returns the exit code."""
    if state.evaluated_at and at < durations.parse_time(state.evaluated_at):
        print(
            f"turnlens alerts: {state_path} was last evaluated at {state.evaluated_at}, after "
            f"{alerting.iso(at)}; replay with --state pointing at another file",
            file=sys.stderr,
        )
        return alerting.EXIT_ERROR
    with leases.reading(store):  # no file the evaluation lists is deleted before it ends
        try:
            con = connect(store)  # reopened each time: the catalog may have been rewritten since
        except duckdb.Error as exc:
            print(f"turnlens alerts: cannot open the catalog: {exc}", file=sys.stderr)
            return alerting.EXIT_ERROR

        def recover(exc: BaseException) -> bool:  # an unreadable segment is quarantined, the rule rerun
            return bool(quarantine.recover(store, exc))

        try:
            with contextlib.suppress(duckdb.Error):  # a broken view fails its rules below, one by one
                quarantine.retrying(store, lambda: alerting.snapshot_shared_views(con, rules))
            result = alerting.run_once(
                con,
                rules,
                state,
                at,
                recover=recover,
                dashboard_url=delivery.dashboard_url,
                repeat_interval=delivery.repeat_interval,
            )
        finally:
            con.close()
    # The news goes into every target's outbox and is saved before anything is sent; it leaves an outbox
    # only once delivered, so a target that is down now hears it at its next successful run.
    errors = list(result.errors)
    generator = f"{delivery.dashboard_url.rstrip('/')}/{alerting.ALERTS_PAGE}"
    news = [alerting.alert_record(t, generator) for t in result.transitions + result.repeats]
    errors += state.queue(targets, news)
    state.save(state_path)
    alerting.append_history(state_path, result.transitions)
    for target in targets:
        errors += alerting.deliver(target, state, at, resend, deadline_s=deadline_s)
    state.save(state_path)
    for error in errors:
        print(f"turnlens alerts: {error}", file=sys.stderr)
    pending = sum(1 for a in state.alerts.values() if a.state == "pending")
    critical = sum(1 for a in result.firing if a.severity == "critical")
    started = sum(1 for t in result.transitions if t.status == "firing")
    gone = len(result.transitions) - started
    print(
        f"turnlens alerts {alerting.iso(at)} (as of {asof.describe(state.as_of or asof.NOW)}): "
        f"{len(result.firing)} firing ({critical} critical), {pending} pending; {started} started, "
        f"{gone} resolved" + (f", {len(result.repeats)} repeated" if result.repeats else ""),
        file=sys.stderr,
    )
    return alerting.EXIT_ERROR if errors else result.exit_code


def cmd_test(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.files:
        try:
            rule, cases = run_test_file(path)
        except (OSError, ValueError, alerting.RuleError) as exc:
            print(f"{path}: ERROR {exc}")
            return alerting.EXIT_ERROR
        for case in cases:
            print(f"{path.name} [{rule.name}] {case.name}: {'ok' if case.passed else 'FAILED'}")
            for failure in case.failures:
                print(f"    {failure}")
            failed += not case.passed
    print("SUCCESS" if not failed else f"FAILED: {failed} case(s)")
    return 0 if not failed else 1


def cmd_list(args: argparse.Namespace) -> int:
    try:
        rules = alerting.load_rules(args.rules)
    except alerting.RuleError as exc:
        print(f"turnlens alerts: {exc}", file=sys.stderr)
        return alerting.EXIT_ERROR
    if args.markdown:
        print("| alert | severity | labels | for | fires when |")
        print("|---|---|---|---|---|")
    for rule in rules:
        labels = ", ".join(f"{k}={v}" for k, v in rule.labels.items())
        if args.markdown:
            print(
                f"| `{rule.name}` | {rule.severity} | {labels} | {durations.format_duration(rule.for_)} "
                f"| {rule.grain} |"
            )
        else:
            print(f"{rule.name:34} {rule.severity:8} {durations.format_duration(rule.for_):>4}  {rule.grain}")
    return 0
