"""Several collectors and materialisers on one store, killed with -9 at random while the OpenTelemetry SDK's
OTLP/HTTP exporters send to all of them as a load balancer would: no acknowledged span is lost, the catalogue
reads the newest version of the derived state, and that state is, row for row in every table, what a single
full build of the same store computes."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import otlp_samples as s
import psutil
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from storebuilder import rounded
from turnlens.kernel.layout import segments_glob
from turnlens.queries import manifest as derived_manifest
from turnlens.queries import materialize
from turnlens.sample_data.simulate import Simulation

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
MATERIALIZER = ("materialize", "--every", "1", "--margin", "0", "--grace", "0", "--threads", "1", "--quiet")
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
START_S = 180.0  # a collector binds every view of the catalogue before it listens: slow on a busy machine


class Sender:
    """One application's exporters behind a load balancer: batch after batch of simulated turns, each batch to
    the next collector, and to the one after when a collector is down. Keeps the span ids some collector
    acknowledged (its exporter returned SUCCESS: the collector answered 200)."""

    def __init__(self, endpoints: list[str], first: int) -> None:
        self.exporters = [OTLPSpanExporter(endpoint=endpoint, timeout=2) for endpoint in endpoints]
        self.first = first
        self.acknowledged: set[str] = set()
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _batches(self) -> Iterator[list[ReadableSpan]]:
        for run in range(1000):
            yield from Simulation(sessions=30, seed=self.first * 100_000 + run).batches(max_spans=150)

    def _run(self) -> None:
        turn = self.first
        for batch in self._batches():
            if len(self.acknowledged) >= SPANS_PER_SENDER:  # enough to check; the kills go on
                return
            time.sleep(0.1)
            for _ in range(3 * len(self.exporters)):
                if self._stop.is_set():
                    return
                exporter = self.exporters[turn % len(self.exporters)]
                turn += 1
                if exporter.export(batch) is SpanExportResult.SUCCESS:
                    self.acknowledged |= {f"{span.context.span_id:016x}" for span in batch}
                    break
                self.failures += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        for exporter in self.exporters:
            exporter.shutdown()


class Materializer:
    """`turnlens materialize --every` beside the collectors, as it would run on a host of its own."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [*s.TURNLENS, *MATERIALIZER, "--store", str(self.store)]
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, cwd=s.REPO)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:.0f} s"
        time.sleep(0.2)


def _published_after(store: Path, unix_nano: int) -> bool:
    """Whether the current derived state is whole and covers the spans received up to `unix_nano`."""
    manifest = derived_manifest.current_snapshot(store)
    return manifest is not None and manifest.complete and manifest.watermark > unix_nano


def _start(collector: s.CollectorProcess) -> threading.Thread:
    """Starts a collector in the background: it binds every view of the catalogue before it listens."""
    thread = threading.Thread(target=collector.start, args=(START_S,), daemon=True)
    thread.start()
    return thread


def _kill_child(collectors: list[s.CollectorProcess], role: str, within_s: float) -> bool:
    """kill -9 a collector's `turnlens <role>` child as soon as one runs; False if none ran in time."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        for collector in collectors:
            assert collector.proc is not None
            with contextlib.suppress(psutil.NoSuchProcess):
                for child in psutil.Process(collector.proc.pid).children(recursive=True):
                    with contextlib.suppress(psutil.NoSuchProcess):
                        if role in child.cmdline():
                            child.send_signal(signal.SIGKILL)
                            return True
        time.sleep(0.02)
    return False


def _processes_on(store: Path) -> list[psutil.Process]:
    """turnlens processes still working on `store`."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if process.pid != os.getpid() and str(store) in " ".join(process.info["cmdline"] or []):
                found.append(process)
    return found


# untiered_tool is one finding per tool and day, but a partition keeps the first untiered call among its own
# turns (docs/derived-state.md): which partitions hold a candidate depends on the refreshes that ran, so these
# rows (and the count of findings in `turns` they add to) are compared as the catalogue reads them
STORED = {
    "divergences": "select * from read_parquet({files}) where kind <> 'untiered_tool' order by all",
    "turns": "select * exclude (findings) from read_parquet({files}) order by all",
}
AS_READ = ("divergences", "turns")


def _derived_rows(store: Path) -> dict[str, list[tuple]]:
    """Every row of every table of the store's current derived state, sorted (and the views AS_READ)."""
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None and manifest.complete
    con = duckdb.connect()
    try:
        rows = {
            table: con.execute(
                STORED.get(table, "select * from read_parquet({files}) order by all").format(
                    files=derived_manifest.sql_list(manifest.table_files(table))
                )
            ).fetchall()
            for table in derived_manifest.TABLES
        }
    finally:
        con.close()
    rows |= {f"{view} read": s.query(store, f"select * from {view} order by all") for view in AS_READ}
    return {table: [rounded(row) for row in table_rows] for table, table_rows in rows.items()}


def test_three_collectors_and_two_materialisers_killed_at_random_lose_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    victims = list(VICTIMS)
    rng.shuffle(victims)
    collectors = [s.CollectorProcess(store, *args) for args in COLLECTOR_ARGS]
    starting = [_start(collector) for collector in collectors]  # all at once, on a store none has created
    for thread in starting:
        thread.join()
    materializer = Materializer(store)
    materializer.start()
    senders = [Sender([f"http://{c.http}/v1/traces" for c in collectors], first) for first in range(3)]
    killed: list[str] = []
    started = time.monotonic()
    try:
        # the kills land on refreshes: the first (full) build is done
        _wait_for(lambda: _published_after(store, 0), "a first whole version of the derived state")
        for victim in victims:
            time.sleep(rng.uniform(0.5, 2.0))
            if victim.startswith("collector"):
                collector = collectors[int(victim.split()[1])]
                collector.kill()  # SIGKILL
                starting.append(_start(collector))  # the same ports; meanwhile the others take its share
            elif victim == "materializer":
                materializer.kill()
                materializer.start()
            elif not _kill_child(collectors, victim.split()[1], within_s=4.0):
                continue
            killed.append(victim)
        for thread in starting:
            thread.join()
        # the materialisers that survived or were restarted take up what the dead ones left
        chaos_ended = time.time_ns()
        _wait_for(lambda: _published_after(store, chaos_ended), "a version covering the time after the kills")
    finally:
        for sender in senders:
            sender.stop()
        exits = [collector.stop() for collector in collectors]
        materializer.stop()
    chaos_s = time.monotonic() - started
    what = f"seed {seed}, kills {killed} in {chaos_s:.0f} s"
    assert exits == [0, 0, 0], f"{what}\n" + "\n".join(collectors[0].lines[-20:])
    assert sum(v.startswith("collector") for v in killed) == 3 and "materializer" in killed, what

    # a killed collector's maintenance children ended with it: nothing works on the store any more
    deadline = time.monotonic() + 15
    while (left := _processes_on(store)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"{what}: still running: {[p.info['cmdline'] for p in left]}"

    # the catalogue reads a version whose files are all there (a materialiser stopped between renaming the
    # manifest and the catalogue leaves it one version behind, which the next run catches up)
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None, what
    assert s.query(store, "select count(*) from turns")[0][0] > 0, what

    acknowledged = set().union(*(sender.acknowledged for sender in senders))
    assert len(acknowledged) > 1000, what
    rows = s.query(
        store, "select span_id from spans where span_id in (select unnest($1))", [sorted(acknowledged)]
    )
    missing = acknowledged - {row[0] for row in rows}
    assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged spans lost; {what}"

    # the state the concurrent runs left, brought up to date by one more refresh (its deltas folded into the
    # partitions' files, which _derived_rows reads), is a full build's
    refresh = subprocess.run(
        [*s.TURNLENS, "materialize", "--store", str(store), "--margin", "0", "--fold", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=s.REPO,
    )
    assert refresh.returncode == 0, refresh.stderr
    assert json.loads(refresh.stdout.splitlines()[-1])["mode"] == "refresh", what
    incremental = _derived_rows(store)
    [(generation,)] = s.query(store, "select generation from turnlens_snapshot")
    assert generation == derived_manifest.current_snapshot(store).generation, what  # type: ignore[union-attr]
    assert len(incremental["turns"]) > 50, what
    built = materialize.materialize(store, segments_glob(store), full=True, margin_s=0)
    assert built["mode"] == "full"
    full = _derived_rows(store)
    assert incremental.keys() == full.keys()
    for table in incremental:
        assert incremental[table] == full[table], f"{table} differs from a full build; {what}"
    assert s.query(store, "select count(*) from turns") == [(len(full["turns"]),)]  # the catalogue reads it
    print(f"{len(acknowledged)} spans acknowledged, {manifest.version} versions; {what}", file=sys.stderr)
