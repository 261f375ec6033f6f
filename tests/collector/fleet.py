"""A fleet on one store, as the several-writers tests run it: applications exporting to collectors behind a
load balancer, `turnlens materialize --every` beside them, and what they must leave: every acknowledged span,
and a derived state equal to a full build's."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import duckdb
import otlp_samples as s
import psutil
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from storebuilder import rounded
from turnlens.kernel.layout import segments_glob
from turnlens.queries import manifest as derived_manifest
from turnlens.queries import materialize
from turnlens.sample_data.simulate import Simulation

MATERIALIZER = ("materialize", "--every", "1", "--margin", "0", "--grace", "0", "--threads", "1", "--quiet")
START_S = 180.0  # a collector binds every view of the catalogue before it listens: slow on a busy machine


class Sender:
    """One application's exporters behind a load balancer: batch after batch of simulated turns, each batch to
    the next collector, and to the one after when a collector is down. Keeps the span ids some collector
    acknowledged (its exporter returned SUCCESS: the collector answered 200)."""

    def __init__(self, endpoints: list[str], first: int, spans: int) -> None:
        self.exporters = [OTLPSpanExporter(endpoint=endpoint, timeout=2) for endpoint in endpoints]
        self.first = first
        self.spans = spans  # it stops once its collectors acknowledged this many
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
            if len(self.acknowledged) >= self.spans:  # enough to check; the kills go on
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
    """`turnlens materialize --every` beside the collectors, as it would run on a host of its own. `prefix`: a
    command it runs under (as `nsenter` puts it in the mount namespace of another "machine")."""

    def __init__(self, store: Path, prefix: Sequence[str] = ()) -> None:
        self.store = store
        self.prefix = tuple(prefix)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [*self.prefix, *s.TURNLENS, *MATERIALIZER, "--store", str(self.store)]
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, cwd=s.REPO)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:.0f} s"
        time.sleep(0.2)


def published_after(store: Path, unix_nano: int) -> bool:
    """Whether the current derived state is whole and covers the spans received up to `unix_nano`."""
    manifest = derived_manifest.current_snapshot(store)
    return manifest is not None and manifest.complete and manifest.watermark > unix_nano


def start_in_background(collector: s.CollectorProcess) -> threading.Thread:
    """Starts a collector in the background: it binds every view of the catalogue before it listens."""
    thread = threading.Thread(target=collector.start, args=(START_S,), daemon=True)
    thread.start()
    return thread


def kill_child(collectors: list[s.CollectorProcess], role: str, within_s: float) -> bool:
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


def processes_on(store: Path) -> list[psutil.Process]:
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


def derived_rows(store: Path) -> dict[str, list[tuple]]:
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


def settle(store: Path, starting: Sequence[threading.Thread]) -> None:
    """After the kills: waits for the restarted collectors, then for a version of the derived state covering
    the time after them (the materialisers that survived or were restarted take up what the dead ones
    left)."""
    for thread in starting:
        thread.join()
    chaos_ended = time.time_ns()
    wait_for(lambda: published_after(store, chaos_ended), "a version covering the time after the kills")


def stop_fleet(
    senders: Sequence[Sender], collectors: Sequence[s.CollectorProcess], materializer: Materializer
) -> list[int]:
    """Stops the senders, the collectors (their exit codes are returned) and the materialiser."""
    for sender in senders:
        sender.stop()
    exits = [collector.stop() for collector in collectors]
    materializer.stop()
    return exits


def assert_acknowledged_stored(store: Path, senders: Sequence[Sender], what: str) -> set[str]:
    """Every span some collector acknowledged to the senders is in the store's `spans`; returns them."""
    acknowledged: set[str] = set().union(*(sender.acknowledged for sender in senders))
    rows = s.query(
        store, "select span_id from spans where span_id in (select unnest($1))", [sorted(acknowledged)]
    )
    missing = acknowledged - {row[0] for row in rows}
    assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged spans lost; {what}"
    return acknowledged


def assert_state_is_a_full_builds(store: Path, what: str) -> dict[str, list[tuple]]:
    """The state the concurrent runs left, brought up to date by one more refresh (its deltas folded into the
    partitions' files, which derived_rows reads), is, table by table, what a full build of the store computes
    (which then replaces it). Returns the full build's rows."""
    refresh = subprocess.run(
        [*s.TURNLENS, "materialize", "--store", str(store), "--margin", "0", "--fold", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=s.REPO,
    )
    assert refresh.returncode == 0, refresh.stderr
    assert json.loads(refresh.stdout.splitlines()[-1])["mode"] == "refresh", what
    incremental = derived_rows(store)
    [(generation,)] = s.query(store, "select generation from turnlens_snapshot")
    assert generation == derived_manifest.current_snapshot(store).generation, what  # type: ignore[union-attr]
    built = materialize.materialize(store, segments_glob(store), full=True, margin_s=0)
    assert built["mode"] == "full"
    full = derived_rows(store)
    assert incremental.keys() == full.keys()
    for table in incremental:
        assert incremental[table] == full[table], f"{table} differs from a full build; {what}"
    assert s.query(store, "select count(*) from turns") == [(len(full["turns"]),)]  # the catalogue reads it
    return full
