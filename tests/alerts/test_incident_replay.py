"""Shipped rules over a real incident: ten minutes of slow cancels, run after run, and replayed with --at."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import payload_schemas
import pytest
import storebuilder

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)
SLOW_ACK_MS = 650  # over both the P95 objective (100 ms) and the P99 page (500 ms)


def at(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cancel every 20 s from T0 to T0+9m40s, each acknowledged 650 ms late; reversible tool, no commit."""
    builder = storebuilder.StoreBuilder(tmp_path_factory.mktemp("incident") / "store")
    for i in range(30):
        storebuilder.cancelled_turn(
            builder,
            session=f"s{i}",
            turn=f"t{i}",
            t0_ms=T0_MS + i * 20_000,
            ack_ms=SLOW_ACK_MS,
            tool="draft_reply",
            tier="button_reversible",
            commit_after_cancel=False,
        )
    return builder.write()


def fired(lines: str) -> list[tuple[str, str]]:
    return [(r["status"], r["labels"]["alertname"]) for r in map(json.loads, lines.splitlines())]


def test_slow_cancels_page_p1_after_a_minute_p2_after_five_and_resolve(
    turnlens, store: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state.json"
    steps = {}
    for minute in (0.5, 1.25, 1.5, 2.5, 5.25, 5.5, 12, 19, 21):
        code, out, err = turnlens("alerts", "run", "--store", store, "--state", state, "--at", at(minute))
        assert "turnlens alerts:" not in err, err  # no rule failed on the real views
        steps[minute] = (code, fired(out))
    assert steps[0.5] == (0, [])  # P99 and P95 active, pending: nobody paged yet
    assert steps[1.25] == (0, [])  # 45 s pending; `for` is 1m
    assert steps[1.5] == (2, [("firing", "CancelToAckP99Lost")])
    assert steps[2.5] == (2, [])  # still firing, nobody re-paged
    assert steps[5.25] == (2, [])  # P95 pending for 4m45s; `for` is 5m
    assert steps[5.5] == (2, [("firing", "CancelToAckP95Slow")])
    assert ("resolved", "CancelToAckP99Lost") in steps[12][1]
    assert steps[12][0] == 1  # the P2 still fires: its window is five minutes
    assert steps[19][0] == 0
    assert ("resolved", "CancelToAckP95Slow") in steps[19][1]
    assert all(status == "resolved" for status, _ in steps[12][1] + steps[19][1])
    # ten minutes after the last span every layer has gone quiet: the fleet stopped sending
    assert steps[21] == (1, [("firing", "LayerStoppedSending")] * 4)


def test_replay_with_at_sees_the_same_incident_and_alertmanager_accepts_it(
    turnlens, store: Path, tmp_path: Path, receiver
) -> None:
    code, out, _ = turnlens(
        "alerts",
        "run",
        "--store",
        store,
        "--state",
        tmp_path / "replay.json",
        "--at",
        at(-1),
        "--until",
        at(19),
        "--every",
        "2m",
        "--notify",
        "stdout",
        "--notify",
        f"alertmanager:{receiver.url}",
    )
    assert code == 0  # by T0+19m everything has resolved
    transitions = fired(out)
    firing_order = [name for status, name in transitions if status == "firing"]
    assert firing_order.index("CancelToAckP99Lost") < firing_order.index("CancelToAckP95Slow")
    assert "CancelToAckBudgetBurnFast" in firing_order  # 100 % of cancels over the SLO, > 20 an hour
    assert sorted(name for status, name in transitions if status == "resolved") == sorted(firing_order)
    posts = receiver.bodies("/api/v2/alerts")
    assert posts
    for body in posts:
        jsonschema.validate(body, payload_schemas.POSTABLE_ALERTS)
    last = {a["labels"]["alertname"]: a for a in posts[-1]}
    assert all(datetime.fromisoformat(a["endsAt"]) <= T0 + timedelta(minutes=19) for a in last.values())
