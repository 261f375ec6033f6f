"""The collector as a process: SIGTERM flushes and exits 0, kill -9 loses nothing acknowledged, retries count
once, and a reader process queries while spans pour in."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import otlp_samples as s
import pytest

READER = """
import json, sys, time
from pathlib import Path
from turnlens.queries.catalog import connect
store, seconds = Path(sys.argv[1]), float(sys.argv[2])
counts, errors = [], []
deadline = time.monotonic() + seconds
# at least `seconds` of reads and at least 8 of them: a loaded host can make one read take seconds
while (time.monotonic() < deadline or len(counts) < 8) and time.monotonic() < deadline + 90:
    try:
        con = connect(store)
        counts.append(con.execute("select count(*) from spans").fetchone()[0])
        con.close()
    except Exception as exc:
        errors.append(repr(exc))
    time.sleep(0.05)
print(json.dumps({"counts": counts, "errors": errors}))
"""


class Sender:
    """Sends distinct requests in a loop from a thread; remembers the span ids the collector acknowledged."""

    def __init__(self, collector: s.CollectorProcess, *, seed: int, spans_per_request: int = 200) -> None:
        self.collector = collector
        self.seed = seed
        self.spans_per_request = spans_per_request
        self.acknowledged: set[str] = set()
        self.refused = 0
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sender:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            request = s.simple_request(self.spans_per_request, seed=self.seed * 100_000 + n)
            try:
                status, _, _ = s.post(
                    self.collector.http, "/v1/traces", request.SerializeToString(), s.protobuf_headers()
                )
            except OSError:
                self.failed += 1  # the collector is gone (killed or stopped): not acknowledged
                time.sleep(0.05)
                continue
            if status == 200:
                self.acknowledged |= s.span_ids(request)
            else:
                self.refused += 1


def stored_ids(store: Path, ids: set[str]) -> set[str]:
    rows = s.query(store, "select span_id from spans where span_id in (select unnest($1))", [sorted(ids)])
    return {row[0] for row in rows}


def test_sigterm_finishes_the_request_in_progress_flushes_and_exits_0(start_collector) -> None:  # noqa: ANN001
    collector = start_collector()
    request = s.simple_request(50, seed=123).SerializeToString()
    host, port = collector.http.split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(
        f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"Content-Length: {len(request)}\r\n\r\n".encode() + request[:100]
    )
    time.sleep(0.5)
    collector.signal(signal.SIGTERM)
    time.sleep(0.5)
    with pytest.raises(OSError):  # no longer accepting
        s.post(collector.http, "/v1/traces", request, s.protobuf_headers())
    sock.sendall(request[100:])
    answer = sock.recv(65536)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert collector.proc.wait(30) == 0, collector.output()
    assert "stopped" in collector.output()
    assert len(stored_ids(collector.store, s.span_ids(s.simple_request(50, seed=123)))) == 50


# What a stop may take with the default 10 s shutdown grace: each maintenance child 10 s to end, the requests
# in progress 10 s, the last refresh 10 s (collector/server.py, stop); beside the rest of the suite on two
# cores it once took more than 30 s
STOP_WITHIN_S = 60


def test_sigterm_under_load_keeps_every_acknowledged_span(start_collector) -> None:  # noqa: ANN001
    collector = start_collector()
    with Sender(collector, seed=1) as sender:
        time.sleep(2.0)
        collector.signal(signal.SIGTERM)
        try:
            code = collector.proc.wait(STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {STOP_WITHIN_S} s after SIGTERM:\n{collector.output()}")
        assert code == 0, collector.output()
    assert sender.acknowledged
    assert stored_ids(collector.store, sender.acknowledged) == sender.acknowledged


def test_retried_exports_are_counted_once(start_collector) -> None:  # noqa: ANN001
    collector = start_collector()
    request = s.simple_request(30, seed=55).SerializeToString()
    for _ in range(3):  # an exporter that never saw the answer sends it again
        status, _, _ = s.post(collector.http, "/v1/traces", request, s.protobuf_headers())
        assert status == 200
    assert s.query(collector.store, "select count(*), count(distinct span_id) from spans") == [(30, 30)]
    raw = s.query(collector.store, "select count(*) from read_parquet($1)",
                  [str(collector.store / "segments" / "*" / "*.parquet")])
    assert raw == [(90,)]  # three copies on disk, one in the view


@pytest.mark.slow
def test_a_reader_process_queries_while_spans_arrive(start_collector) -> None:  # noqa: ANN001
    collector = start_collector()
    with Sender(collector, seed=2) as sender:
        reader = subprocess.run(
            [sys.executable, "-c", READER, str(collector.store), "4"],
            capture_output=True, text=True, timeout=120,
        )
    assert reader.returncode == 0, reader.stderr
    seen = json.loads(reader.stdout)
    assert seen["errors"] == []
    assert len(seen["counts"]) > 5 and seen["counts"][-1] > seen["counts"][0]  # it saw ingestion progress
    assert sender.refused == 0 and len(sender.acknowledged) > 0


@pytest.mark.slow
def test_kill_9_under_load_loses_nothing_acknowledged(start_collector, tmp_path: Path) -> None:  # noqa: ANN001
    store = tmp_path / "crash-store"
    collector = start_collector(store=store)
    senders = [Sender(collector, seed=10 + i) for i in range(3)]
    for sender in senders:
        sender.__enter__()
    time.sleep(4.0)
    collector.proc.send_signal(signal.SIGKILL)
    collector.proc.wait(10)
    for sender in senders:
        sender.__exit__()
    acknowledged = set().union(*(sender.acknowledged for sender in senders))
    assert len(acknowledged) > 1000
    restarted = start_collector(store=store)
    assert stored_ids(store, acknowledged) == acknowledged
    # the restarted collector serves, and writes beside what the killed one left
    request = s.simple_request(5, seed=999)
    assert s.post(restarted.http, "/v1/traces", request.SerializeToString(), s.protobuf_headers())[0] == 200
    assert stored_ids(store, s.span_ids(request)) == s.span_ids(request)
    assert restarted.stop() == 0


@pytest.mark.slow
def test_kill_9_of_the_collector_takes_its_maintenance_children_with_it(start_collector) -> None:  # noqa: ANN001
    """A killed collector's compaction and materialiser died with it instead of running on, unowned, against
    the store (where a new collector starts its own)."""
    import psutil

    collector = start_collector("--compact-interval", "0.3s", "--materialize-interval", "0.3s")
    assert collector.proc is not None
    parent = psutil.Process(collector.proc.pid)
    seen: dict[str, psutil.Process] = {}
    nice: dict[str, int] = {}
    deadline = time.monotonic() + 30
    while len(seen) < 2 and time.monotonic() < deadline:  # both kinds of child alive at the same time
        seen = {}
        for child in parent.children(recursive=True):
            try:
                role = next((r for r in ("compact", "materialize") if r in child.cmdline()), None)
                if role:
                    nice[role] = child.nice()
            except psutil.NoSuchProcess:
                continue
            if role:
                seen[role] = child
        time.sleep(0.02)
    assert set(seen) == {"compact", "materialize"}, "the collector started no maintenance children"
    # both yield to the collector's own threads; the materialiser less than compaction: its speed is how
    # fresh the per-turn views are
    assert parent.nice() < nice["materialize"] < nice["compact"]
    collector.kill()

    def running() -> list[str]:
        names = []
        for role, child in seen.items():
            try:
                if child.status() != psutil.STATUS_ZOMBIE:  # an orphan's zombie waits for init to reap it
                    names.append(role)
            except psutil.NoSuchProcess:
                pass
        return names

    deadline = time.monotonic() + 5
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = running()
    for role in alive:
        seen[role].kill()
    assert not alive, f"still running 5 s after kill -9 of the collector: {alive}"


def test_the_materialiser_runs_with_the_threads_and_memory_limit_it_was_given(start_collector) -> None:  # noqa: ANN001
    """--materialize-threads and --materialize-memory-limit reach the refresh loop the collector keeps running
    (an operator with cores and memory to spare gives it more: docs/benchmarks-derived.md)."""
    import psutil

    collector = start_collector("--materialize-threads", "1", "--materialize-memory-limit", "600MB")
    assert collector.proc is not None
    parent = psutil.Process(collector.proc.pid)
    command: list[str] = []
    deadline = time.monotonic() + 30
    while not command and time.monotonic() < deadline:
        for child in parent.children(recursive=True):
            try:
                if "materialize" in child.cmdline():
                    command = child.cmdline()
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.05)
    assert command, "the collector started no materialiser"
    flags = " ".join(command[command.index("materialize"):])
    assert "--threads 1 " in flags and "--memory-limit 600MB " in flags, flags
    request = s.simple_request(20, seed=7)
    assert s.post(collector.http, "/v1/traces", request.SerializeToString(), s.protobuf_headers())[0] == 200
    assert collector.stop() == 0
    assert stored_ids(collector.store, s.span_ids(request)) == s.span_ids(request)
