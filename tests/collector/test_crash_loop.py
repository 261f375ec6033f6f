"""kill -9, again and again, of the collector and of its compaction and materialisation children, while the
OpenTelemetry SDK's own OTLP/HTTP exporters send: every span an exporter was told was accepted is in the
store at the end, and the store's maintenance still works."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import otlp_samples as s
import psutil
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

pytestmark = pytest.mark.slow

ROUNDS = ("collector", "compact", "collector", "materialize", "collector")
# a shutdown grace a loaded host cannot outrun: the last collector's stop refreshes the per-turn views
MAINTENANCE = (
    *("--compact-interval", "1s", "--materialize-interval", "2s", "--materialize-margin", "0"),
    *("--shutdown-grace", "120s"),
)


class Exporting:
    """A thread sending batches of new spans through the SDK's OTLPSpanExporter; keeps what was acknowledged
    (the exporter returned SUCCESS: the collector answered 200)."""

    def __init__(self, endpoint: str, seed: int) -> None:
        self.exporter = OTLPSpanExporter(endpoint=endpoint, timeout=2)
        spans = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": f"crash-{seed}"}))
        provider.add_span_processor(SimpleSpanProcessor(spans))
        self.tracer, self.spans = provider.get_tracer("tests.crash"), spans
        self.acknowledged: set[str] = set()
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _batch(self) -> list[ReadableSpan]:
        self.spans.clear()
        for _ in range(10):
            with self.tracer.start_as_current_span("turn", attributes={"session.id": "crash"}):
                for _ in range(9):
                    with self.tracer.start_as_current_span("step"):
                        pass
        return list(self.spans.get_finished_spans())

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = self._batch()
            if self.exporter.export(batch) is SpanExportResult.SUCCESS:
                self.acknowledged |= {f"{span.context.span_id:016x}" for span in batch}
            else:
                self.failures += 1
                time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _descendants(collector: s.CollectorProcess) -> list[psutil.Process]:
    assert collector.proc is not None
    try:
        return psutil.Process(collector.proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _kill_child(collector: s.CollectorProcess, role: str, within_s: float) -> bool:
    """kill -9 the collector's `turnlens <role>` child as soon as one runs; False if none ran in time."""
    assert collector.proc is not None
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        for child in _descendants(collector):
            try:
                if role in child.cmdline():
                    child.send_signal(signal.SIGKILL)
                    return True
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.02)
    return False


def test_kill_9_of_collector_compactor_and_materialiser_loses_nothing_acknowledged(tmp_path: Path) -> None:
    store = tmp_path / "store"
    collector = s.CollectorProcess(store, *MAINTENANCE).start()
    senders = [Exporting(f"http://{collector.http}/v1/traces", seed) for seed in range(2)]
    killed = {"collector": 0, "compact": 0, "materialize": 0}
    orphans: list[psutil.Process] = []  # a killed collector's children (they die with it)
    started = time.monotonic()
    try:
        for role in ROUNDS:
            time.sleep(0.7)
            if role == "collector":
                orphans += _descendants(collector)
                collector.proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
                collector.proc.wait(10)  # type: ignore[union-attr]
                killed[role] += 1
                collector.start()  # the same store and ports: the exporters carry on
            elif _kill_child(collector, role, within_s=4.0):
                killed[role] += 1
        time.sleep(1.0)
    finally:
        for sender in senders:
            sender.stop()
    orphans += _descendants(collector)
    assert collector.stop(timeout_s=150) == 0, "\n".join(collector.lines[-20:])
    # the last collector may stop before its materialiser's first run: its stop covers what its predecessors
    # acknowledged, whose materialisers were killed
    assert "per-turn views cover every span stored" in collector.lines[-1], "\n".join(collector.lines[-20:])
    for orphan in orphans:  # should one have outlived its collector, it is not waited for here
        with contextlib.suppress(psutil.NoSuchProcess):
            orphan.send_signal(signal.SIGKILL)
    psutil.wait_procs(orphans, timeout=10)
    elapsed = time.monotonic() - started
    acknowledged = set().union(*(sender.acknowledged for sender in senders))
    assert len(acknowledged) > 1000
    assert killed["collector"] == 3 and killed["compact"] >= 1 and killed["materialize"] >= 1, killed
    rows = s.query(
        store, "select span_id from spans where span_id in (select unnest($1))", [sorted(acknowledged)]
    )
    missing = acknowledged - {row[0] for row in rows}
    assert not missing, f"{len(missing)} acknowledged spans lost after {killed} kills in {elapsed:.0f} s"
    # what the killed children left is finished or cleared: compaction runs, the per-turn views answer
    after = subprocess.run(
        [*s.TURNLENS, "compact", "--store", str(store)], capture_output=True, text=True, timeout=120
    )
    assert after.returncode == 0, after.stderr
    assert s.query(store, "select count(*) from turns")[0][0] > 0
    assert not list(store.glob(".turnlens.duckdb.*.tmp*")), "a killed run's temporary catalog was left"
    print(f"{len(acknowledged)} acknowledged, {killed} kills, {elapsed:.0f} s", file=sys.stderr)
