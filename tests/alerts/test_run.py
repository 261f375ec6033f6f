"""`turnlens alerts run` on a store: pending → firing → resolved across runs, `for`, exit codes, notifiers."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import jsonschema
import payload_schemas
import pytest
import storebuilder
from turnlens.alerts import alerting
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog, materialize

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)  # the cancel of the incident
T0_MS = int(T0.timestamp() * 1000)

RECENT_CANCEL = """\
-- One row per turn whose cancel was requested in the five minutes before the evaluation.
-- name: RecentCancel
-- severity: {severity}
-- labels: priority=P1
-- for: 2m
-- summary: Turn {{turn_id}} was cancelled
-- description: Session {{session_id}} cancelled turn {{turn_id}}.
-- runbook: Nothing to do; this rule exists for the tests.
select session_id, turn_id, count(*) as value
from span_events
where name = 'cancel.requested'
  and (hlc >> 16) <= $at_ms
  and (hlc >> 16) > $at_ms - 5 * 60 * 1000
group by session_id, turn_id
"""


def at(delta: timedelta) -> str:
    return (T0 + delta).isoformat().replace("+00:00", "Z")


def rules_dir(tmp_path: Path, severity: str = "critical") -> Path:
    folder = tmp_path / f"rules-{severity}"
    folder.mkdir()
    (folder / "recent_cancel.sql").write_text(RECENT_CANCEL.format(severity=severity))
    (folder / "_order").write_text("recent_cancel.sql\n")
    return folder


@pytest.fixture
def store(builder, tmp_path: Path) -> Path:
    """Two turns; one cancelled at T0, the other completed, a minute earlier."""
    builder.span(
        session="s1",
        turn="t1",
        layer="stream",
        name="stream",
        start_ms=T0_MS - 2000,
        end_ms=T0_MS + 80,
        events=[
            ("cancel.requested", T0_MS, {"turnlens.cancel.origin": "user_clicked"}),
            ("cancel.acknowledged", T0_MS + 80, {}),
        ],
    )
    builder.span(
        session="s2",
        turn="t9",
        layer="stream",
        name="stream",
        start_ms=T0_MS - 60_000,
        end_ms=T0_MS - 50_000,
        events=[("stream.completed", T0_MS - 50_000, {})],
    )
    return builder.write(_queries_dir())


def _queries_dir() -> Path | None:
    """The real SQL folder, unless TURNLENS_TEST_QUERIES_DIR points at a copy (a view is half-written)."""
    value = os.environ.get("TURNLENS_TEST_QUERIES_DIR")
    return Path(value) if value else None


def lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_pending_then_firing_then_resolved_across_runs(turnlens, store: Path, tmp_path: Path) -> None:
    rules = rules_dir(tmp_path)
    run = lambda t: turnlens("alerts", "run", "--store", store, "--rules", rules, "--at", at(t))  # noqa: E731

    code, out, _ = run(timedelta(minutes=-1))
    assert (code, lines(out)) == (0, [])

    code, out, _ = run(timedelta(seconds=30))  # active, but `for` is 2m: pending, nobody paged
    assert (code, lines(out)) == (0, [])
    state = json.loads((store / "alerts" / "state.json").read_text())
    assert [a["state"] for a in state["alerts"].values()] == ["pending"]

    code, out, _ = run(timedelta(minutes=2, seconds=29))  # 1m59s after it became active: still pending
    assert (code, lines(out)) == (0, [])

    code, out, _ = run(timedelta(minutes=2, seconds=30))
    (page,) = lines(out)
    assert code == 2
    assert page["status"] == "firing"
    assert page["labels"] == {
        "alertname": "RecentCancel",
        "severity": "critical",
        "priority": "P1",
        "session_id": "s1",
        "turn_id": "t1",
    }
    assert page["annotations"]["summary"] == "Turn t1 was cancelled"
    assert page["startsAt"] == at(timedelta(minutes=2, seconds=30)).replace("Z", ".000Z")

    code, out, _ = run(timedelta(minutes=3))  # still firing: the scheduler still sees 2, nobody is re-paged
    assert (code, lines(out)) == (2, [])

    code, out, _ = run(timedelta(minutes=6))  # the cancel left the 5-minute window
    (resolved,) = lines(out)
    assert code == 0
    assert resolved["status"] == "resolved"
    assert resolved["fingerprint"] == page["fingerprint"]
    assert resolved["endsAt"] == at(timedelta(minutes=6)).replace("Z", ".000Z")

    history = alerting.load_history(store)
    assert [h["status"] for h in history] == ["firing", "resolved"]


def test_a_condition_that_vanishes_while_pending_never_pages(turnlens, store: Path, tmp_path: Path) -> None:
    rules = rules_dir(tmp_path)
    for t in (timedelta(minutes=4), timedelta(minutes=5, seconds=30), timedelta(minutes=8)):
        code, out, _ = turnlens("alerts", "run", "--store", store, "--rules", rules, "--at", at(t))
        assert (code, lines(out)) == (0, [])
    assert alerting.load_history(store) == []


def test_warning_exits_1(turnlens, store: Path, tmp_path: Path) -> None:
    rules = rules_dir(tmp_path, severity="warning")
    code, out, _ = turnlens(
        "alerts",
        "run",
        "--store",
        store,
        "--rules",
        rules,
        "--at",
        at(timedelta(seconds=10)),
        "--until",
        at(timedelta(minutes=3)),
        "--every",
        "1m",
    )
    assert code == 1
    assert [p["labels"]["severity"] for p in lines(out)] == ["warning"]


def test_errors_exit_3(turnlens, store: Path, tmp_path: Path) -> None:
    rules = rules_dir(tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "_order").write_text("bad.sql\n")
    (broken / "bad.sql").write_text(
        RECENT_CANCEL.format(severity="critical").replace("span_events", "no_such_view")
    )
    assert turnlens("alerts", "run", "--store", store, "--rules", broken, "--at", at(timedelta(0)))[0] == 3
    (broken / "bad.sql").write_text(RECENT_CANCEL.format(severity="urgent"))
    code, _, err = turnlens("alerts", "run", "--store", store, "--rules", broken)
    assert code == 3 and "severity 'urgent'" in err
    assert turnlens("alerts", "run", "--store", tmp_path / "nowhere", "--rules", rules)[0] == 3
    assert turnlens("alerts", "run", "--store", store, "--rules", rules, "--notify", "pager:x")[0] == 3
    unreachable = "webhook:http://127.0.0.1:9/hook"  # discard port: nothing listens
    code, _, err = turnlens(
        "alerts",
        "run",
        "--store",
        store,
        "--rules",
        rules,
        "--notify",
        unreachable,
        "--at",
        at(timedelta(seconds=10)),
    )
    assert code == 0  # nothing fired, so nothing was sent
    code, _, err = turnlens(
        "alerts",
        "run",
        "--store",
        store,
        "--rules",
        rules,
        "--notify",
        unreachable,
        "--at",
        at(timedelta(minutes=3)),
    )
    assert code == 3 and "notify webhook" in err


def test_time_going_backwards_needs_its_own_state_file(turnlens, store: Path, tmp_path: Path) -> None:
    rules = rules_dir(tmp_path)
    assert (
        turnlens("alerts", "run", "--store", store, "--rules", rules, "--at", at(timedelta(hours=1)))[0] == 0
    )
    code, _, err = turnlens(
        "alerts", "run", "--store", store, "--rules", rules, "--at", at(timedelta(minutes=3))
    )
    assert code == 3 and "--state" in err
    replay = tmp_path / "replay.json"
    code, out, _ = turnlens(
        "alerts",
        "run",
        "--store",
        store,
        "--rules",
        rules,
        "--state",
        replay,
        "--at",
        at(timedelta(0)),
        "--until",
        at(timedelta(minutes=10)),
        "--every",
        "30s",
    )
    assert [p["status"] for p in lines(out)] == ["firing", "resolved"]
    assert [h["status"] for h in alerting.load_history(store)] == []  # the replay's history is its own
    assert [h["status"] for h in lines(replay.with_name("history.jsonl").read_text())] == [
        "firing",
        "resolved",
    ]


def test_webhook_and_alertmanager_receive_valid_payloads(
    turnlens, store: Path, tmp_path: Path, receiver
) -> None:
    rules = rules_dir(tmp_path)
    notify = [
        "--notify",
        f"webhook:{receiver.url}/hook",
        "--notify",
        f"alertmanager:{receiver.url}",
        "--notify",
        f"file:{tmp_path / 'pages.jsonl'}",
    ]
    for t in (
        timedelta(seconds=30),
        timedelta(minutes=2, seconds=30),
        timedelta(minutes=3),
        timedelta(minutes=6),
    ):
        turnlens("alerts", "run", "--store", store, "--rules", rules, "--at", at(t), *notify)

    hooks = receiver.bodies("/hook")
    for payload in hooks:
        jsonschema.validate(payload, payload_schemas.WEBHOOK_V4)
    assert [h["status"] for h in hooks] == ["firing", "resolved"]  # the second firing run re-paged nobody
    assert hooks[0]["groupLabels"] == {"alertname": "RecentCancel"}
    assert hooks[0]["alerts"][0]["endsAt"] == "0001-01-01T00:00:00Z"
    assert hooks[1]["alerts"][0]["endsAt"] == at(timedelta(minutes=6)).replace("Z", ".000Z")
    assert all(r["content_type"] == "application/json" for r in receiver.requests)

    posts = receiver.bodies("/api/v2/alerts")
    for body in posts:
        jsonschema.validate(body, payload_schemas.POSTABLE_ALERTS)
    assert len(posts) == 3  # firing re-sent at 2m30 and 3m, then the resolution; nothing while pending
    first, again, resolved = (body[0] for body in posts)
    assert first["labels"] == again["labels"] == resolved["labels"]
    assert first["startsAt"] == again["startsAt"] == resolved["startsAt"]
    assert datetime.fromisoformat(again["endsAt"]) > T0 + timedelta(minutes=3)  # kept alive past the next run
    assert resolved["endsAt"] == at(timedelta(minutes=6)).replace("Z", ".000Z")

    recorded = lines((tmp_path / "pages.jsonl").read_text())
    assert [r["status"] for r in recorded] == ["firing", "resolved"]


def test_two_runners_never_interleave(store: Path) -> None:
    with (
        alerting.locked_state(store),
        pytest.raises(RuntimeError, match="holds"),
        alerting.locked_state(store),
    ):
        pass


def interrupted_run(store: Path, rules: Path, evaluations: int, then_s: float = 0.0) -> tuple[int, str]:
    """Runs a real `alerts run --every 1s`, sends it SIGINT `then_s` after its `evaluations`-th summary line,
    and returns its exit code and stderr. Past 30 s without exiting it is aborted with faulthandler on, so
    its stderr says where every thread was."""
    import signal
    import subprocess
    import sys
    import threading
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "turnlens.cli", "alerts", "run", "--store", str(store), "--rules", str(rules),
         "--every", "1s"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    lines: list[str] = []  # stderr as it comes: one summary line per finished evaluation
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "".join(lines).count("turnlens alerts 20") < evaluations:
            assert proc.poll() is None, "".join(lines)
            time.sleep(0.1)
        time.sleep(then_s)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            proc.wait(timeout=30)
        reader.join(10)
    return proc.returncode, "".join(lines)


def test_every_keeps_evaluating_until_interrupted(store: Path, tmp_path: Path) -> None:
    """A real `alerts run --every 1s` process evaluates repeatedly and stops cleanly on SIGINT."""
    code, err = interrupted_run(store, rules_dir(tmp_path), evaluations=2)
    assert code == 0, f"exit {code} after SIGINT:\n{err}"
    assert err.count("turnlens alerts 20") >= 2  # one summary line per evaluation


SLOW = """\
-- A rule whose query takes seconds, so that a Ctrl-C lands while it runs.
-- name: Slow
-- severity: critical
-- labels: priority=P1
-- for: 0m
-- summary: Never fires
-- description: Counts for a while, returns nothing.
-- runbook: Nothing to do; this rule exists for the tests.
select 'slow' as what, count(*) as value from range(600000000) t(x) where x % 7 = 3 having count(*) < 0
"""


def test_a_ctrl_c_during_a_rules_query_stops_the_run_quietly(store: Path, tmp_path: Path) -> None:
    """DuckDB interrupts the query a SIGINT lands in (a RuntimeError), or drops the KeyboardInterrupt when the
    query ends first: either way the run stops, with exit 0 and no error."""
    rules = rules_dir(tmp_path)
    (rules / "slow.sql").write_text(SLOW)
    (rules / "_order").write_text("recent_cancel.sql\nslow.sql\n")
    # the next evaluation starts at once (the last took over the interval): 0.5 s in, it is in the query
    code, err = interrupted_run(store, rules, evaluations=1, then_s=0.5)
    assert code == 0, f"exit {code} after SIGINT:\n{err}"
    assert "interrupted" not in err.lower(), err


def test_a_rule_returning_one_label_set_twice_is_an_error(turnlens, store: Path, tmp_path: Path) -> None:
    rules = rules_dir(tmp_path)
    sql = (rules / "recent_cancel.sql").read_text()
    (rules / "recent_cancel.sql").write_text(
        sql.replace("select session_id, turn_id,", "select session_id,")
        .replace("group by session_id, turn_id", "group by session_id, turn_id")
        .replace("count(*) as value", "turn_id as annotation_turn, 1 as value")
    )
    builder = storebuilder.StoreBuilder(tmp_path / "twice")
    for turn in ("t1", "t2"):
        builder.span(
            session="s1",
            turn=turn,
            layer="stream",
            name="stream",
            start_ms=T0_MS - 1000,
            end_ms=T0_MS,
            events=[("cancel.requested", T0_MS, {})],
        )
    twice = builder.write()
    code, _, err = turnlens(
        "alerts", "run", "--store", twice, "--rules", rules, "--at", at(timedelta(seconds=5))
    )
    assert code == 3 and "same labels" in err


def test_a_still_firing_alert_is_told_again_after_the_repeat_interval_only(
    turnlens, store: Path, tmp_path: Path, receiver
) -> None:
    rules = rules_dir(tmp_path)
    notify = ["--notify", f"webhook:{receiver.url}/hook", "--notify", "stdout", "--repeat-interval", "1m"]
    told = []
    for t in (timedelta(seconds=30), timedelta(minutes=2, seconds=30), timedelta(minutes=3),
              timedelta(minutes=3, seconds=30), timedelta(minutes=4), timedelta(minutes=6)):  # fmt: skip
        code, out, _ = turnlens("alerts", "run", "--store", store, "--rules", rules, "--at", at(t), *notify)
        told.append([r["status"] for r in lines(out)])
    # fired at 2m30; 30 s later nobody is told; a minute later it is told again; then it resolves
    assert told == [[], ["firing"], [], ["firing"], [], ["resolved"]]
    hooks = receiver.bodies("/hook")
    assert [h["status"] for h in hooks] == ["firing", "firing", "resolved"]
    assert hooks[1]["alerts"][0]["startsAt"] == hooks[0]["alerts"][0]["startsAt"]  # the same alert again
    assert [h["status"] for h in alerting.load_history(store)] == ["firing", "resolved"]  # no repeat there


def _shipped_rule(tmp_path: Path, name: str) -> Path:
    """A rules folder holding one of the shipped rules, as it ships."""
    rules = tmp_path / "rules"
    rules.mkdir()
    shipped = Path(alerting.__file__).parent / "rules" / name
    (rules / shipped.name).write_text(shipped.read_text())
    (rules / "_order").write_text(f"{shipped.name}\n")
    return rules


def _one_turn_store(builder: storebuilder.StoreBuilder) -> Path:
    """A store of one turn, whose one span was received at T0."""
    builder.span(session="s1", turn="t1", layer="stream", name="stream", start_ms=T0_MS - 2000, end_ms=T0_MS)
    return builder.write(_queries_dir())


def test_spans_the_per_turn_views_do_not_cover_warn_until_a_materialiser_run_takes_them(
    turnlens, builder, tmp_path: Path
) -> None:
    """The shipped PerTurnStateBehind rule on a real store: a span received after the derived state's
    watermark warns once it has waited two minutes; the run that takes it into the state resolves it."""
    rules = _shipped_rule(tmp_path, "per_turn_state_behind.sql")
    store = _one_turn_store(builder)
    ns = lambda delta: int((T0 + delta).timestamp() * 1e9)  # noqa: E731
    materialize.materialize(store, segments_glob(store), margin_s=0, now_ns=ns(timedelta(seconds=10)))
    # received at T0 + 60 s, after the watermark (T0 + 10 s): the views do not show it yet
    builder.span(
        session="s2", turn="t2", layer="stream", name="stream", start_ms=T0_MS + 50_000, end_ms=T0_MS + 60_000
    )
    builder.write(_queries_dir())
    run = lambda t: turnlens("alerts", "run", "--store", store, "--rules", rules, "--at", at(t))  # noqa: E731

    _, out, err = run(timedelta(minutes=2, seconds=50))  # waiting 110 s
    assert lines(out) == [], err
    _, out, err = run(timedelta(minutes=3, seconds=30))  # waiting 150 s
    [alert] = lines(out)
    assert (alert["status"], alert["labels"]["alertname"]) == ("firing", "PerTurnStateBehind"), err
    assert alert["annotations"]["summary"] == "The per-turn views are 150 s behind the spans received"
    assert "1 stored spans" in alert["annotations"]["description"]

    materialize.materialize(store, segments_glob(store), margin_s=0, now_ns=ns(timedelta(minutes=4)))
    _, out, err = run(timedelta(minutes=4, seconds=30))
    resolved = [(a["status"], a["labels"]["alertname"]) for a in lines(out)]
    assert resolved == [("resolved", "PerTurnStateBehind")], err


def test_spans_inside_the_materialisers_margin_wait_that_margin_before_they_warn(
    turnlens, builder, tmp_path: Path
) -> None:
    """A materialiser told to leave the last five minutes unread (`--materialize-margin 300`) records that
    margin in turnlens_snapshot; PerTurnStateBehind allows for it instead of firing for as long as it runs."""
    rules = _shipped_rule(tmp_path, "per_turn_state_behind.sql")
    store = _one_turn_store(builder)
    ns = lambda delta: int((T0 + delta).timestamp() * 1e9)  # noqa: E731
    # run at T0 + 310 s with a margin of 300 s: the watermark is T0 + 10 s
    materialize.materialize(store, segments_glob(store), margin_s=300, now_ns=ns(timedelta(seconds=310)))
    with duckdb.connect(str(store / catalog.CATALOG_FILE), read_only=True) as con:
        assert con.execute("select margin_s from turnlens_snapshot").fetchall() == [(300.0,)]
    builder.span(  # received at T0 + 60 s
        session="s2", turn="t2", layer="stream", name="stream", start_ms=T0_MS + 50_000, end_ms=T0_MS + 60_000
    )
    builder.write(_queries_dir())
    run = lambda t: turnlens("alerts", "run", "--store", store, "--rules", rules, "--at", at(t))  # noqa: E731

    _, out, err = run(timedelta(minutes=3, seconds=30))  # waiting 150 s, inside the margin
    assert lines(out) == [], err
    _, out, err = run(timedelta(minutes=7, seconds=50))  # waiting 410 s: the margin and 110 s
    assert lines(out) == [], err
    _, out, err = run(timedelta(minutes=8, seconds=30))  # waiting 450 s
    [alert] = lines(out)
    assert (alert["status"], alert["labels"]["alertname"]) == ("firing", "PerTurnStateBehind"), err
