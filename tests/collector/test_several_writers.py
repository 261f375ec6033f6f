"""Several collectors and materialisers on one store, killed with -9 at random while the OpenTelemetry SDK's
OTLP/HTTP exporters send to all of them as a load balancer would: no acknowledged span is lost, the catalogue
reads the newest version of the derived state, and that state is, row for row in every table, what a single
full build of the same store computes."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import otlp_samples as s
import pytest
from fleet import (
    Materializer,
    Sender,
    assert_acknowledged_stored,
    assert_state_is_a_full_builds,
    kill_child,
    processes_on,
    published_after,
    settle,
    start_in_background,
    stop_fleet,
    wait_for,
)
from turnlens.queries import manifest as derived_manifest

# ~60 s on a quiet machine; a machine busy with other builds starts interpreters several times slower
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# every collector compacts every second and deletes what it replaced as soon as no reader reads it
COMMON = ("--compact-interval", "3s", "--grace", "0s", "--materialize-margin", "0")
# collector 0 runs its own materialiser; the second is a `turnlens materialize --every` of its own
COLLECTOR_ARGS = (
    (*COMMON, "--materialize-interval", "1s"),
    (*COMMON, "--materialize-interval", "off"),
    (*COMMON, "--materialize-interval", "off"),
)
VICTIMS = (
    "collector 0",
    "collector 1",
    "collector 2",
    "materializer",
    "materializer",
    "child materialize",
    "child compact",
)
SPANS_PER_SENDER = 1200  # a full build of the store closes the test: its cost grows with the spans


def test_three_collectors_and_two_materialisers_killed_at_random_lose_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    victims = list(VICTIMS)
    rng.shuffle(victims)
    collectors = [s.CollectorProcess(store, *args) for args in COLLECTOR_ARGS]
    # all at once, on a store none has created
    starting = [start_in_background(collector) for collector in collectors]
    for thread in starting:
        thread.join()
    materializer = Materializer(store)
    materializer.start()
    endpoints = [f"http://{c.http}/v1/traces" for c in collectors]
    senders = [Sender(endpoints, first, SPANS_PER_SENDER) for first in range(3)]
    killed: list[str] = []
    started = time.monotonic()
    try:
        # the kills land on refreshes: the first (full) build is done
        wait_for(lambda: published_after(store, 0), "a first whole version of the derived state")
        for victim in victims:
            time.sleep(rng.uniform(0.5, 2.0))
            if victim.startswith("collector"):
                collector = collectors[int(victim.split()[1])]
                collector.kill()  # SIGKILL
                # the same ports; meanwhile the others take its share
                starting.append(start_in_background(collector))
            elif victim == "materializer":
                materializer.kill()
                materializer.start()
            elif not kill_child(collectors, victim.split()[1], within_s=4.0):
                continue
            killed.append(victim)
        settle(store, starting)
    finally:
        exits = stop_fleet(senders, collectors, materializer)
    chaos_s = time.monotonic() - started
    what = f"seed {seed}, kills {killed} in {chaos_s:.0f} s"
    assert exits == [0, 0, 0], f"{what}\n" + "\n".join(collectors[0].lines[-20:])
    assert sum(v.startswith("collector") for v in killed) == 3 and "materializer" in killed, what

    # a killed collector's maintenance children ended with it: nothing works on the store any more
    deadline = time.monotonic() + 15
    while (left := processes_on(store)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"{what}: still running: {[p.info['cmdline'] for p in left]}"

    # the catalogue reads a version whose files are all there (a materialiser stopped between renaming the
    # manifest and the catalogue leaves it one version behind, which the next run catches up)
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None, what
    assert s.query(store, "select count(*) from turns")[0][0] > 0, what

    acknowledged = assert_acknowledged_stored(store, senders, what)
    assert len(acknowledged) > 1000, what
    full = assert_state_is_a_full_builds(store, what)
    assert len(full["turns"]) > 50, what
    print(f"{len(acknowledged)} spans acknowledged, {manifest.version} versions; {what}", file=sys.stderr)
