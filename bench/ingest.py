"""Ingest benchmark: concurrent OTLP/HTTP protobuf senders against `turnlens collect` pinned to one core.

Measures acknowledged (durable) spans per second, checks a reader sees them all, the collector's CPU
seconds per 100k spans and its peak RSS, and in the same run the raw protobuf decode rate of the
same requests in one process: the ceiling. The ratio of the two is the figure to compare across
machines, since absolute rates drift on a shared one.

    .venv/bin/python bench/ingest.py --seconds 20 --senders 4
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

T0_NS = 1_795_000_000_000_000_000
TOOLS = ("send_email", "search_docs", "create_invoice", "refund_payment", "book_meeting")
TIERS = ("read_only", "button_reversible", "soft_irreversible", "hard_irreversible")
LAYERS = ("http", "stream", "runtime", "tool", "third_party")


def _kv(key: str, value: object) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def build_request(index: int, spans: int) -> ExportTraceServiceRequest:
    """`spans` spans of agent turns: 12 attributes and 2 events each; ids, HLCs and keys unique per span."""
    rng = random.Random(index)
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend(
        [
            _kv("service.name", f"agent-{index % 5}"),
            _kv("service.instance.id", f"agent-{index % 5}-{index % 3}"),
            _kv("deployment.environment.name", "bench"),
        ]
    )
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "turnlens.bench"
    scope_spans.scope.version = "1"
    for i in range(spans):
        turn = index * spans + i // 16
        start = T0_NS + (index * spans + i) * 1_000_000
        hlc = ((start // 1_000_000) << 16) | (i % 7)
        span = scope_spans.spans.add()
        span.trace_id = rng.randbytes(16)
        span.span_id = rng.randbytes(8)
        span.parent_span_id = rng.randbytes(8)
        span.name = f"execute_tool {TOOLS[i % len(TOOLS)]}"
        span.kind = 3
        span.start_time_unix_nano = start
        span.end_time_unix_nano = start + rng.randrange(1_000_000, 900_000_000)
        span.attributes.extend(
            [
                _kv("session.id", f"session-{turn // 4}"),
                _kv("turnlens.turn.id", f"turn-{turn}"),
                _kv("turnlens.layer", LAYERS[i % len(LAYERS)]),
                _kv("turnlens.hlc", hlc),
                _kv("gen_ai.operation.name", "execute_tool"),
                _kv("gen_ai.tool.name", TOOLS[i % len(TOOLS)]),
                _kv("gen_ai.tool.call.id", f"call-{index}-{i}"),
                _kv("turnlens.idempotency_key", rng.randbytes(12).hex()),
                _kv("turnlens.tool.tier", TIERS[i % len(TIERS)]),
                _kv("turnlens.tool.dispatch", "eager" if i % 3 else "speculative"),
                _kv("turnlens.tool.billable", i % 2 == 0),
                _kv("gen_ai.usage.output_tokens", rng.randrange(1, 4000)),
            ]
        )
        for step, name in enumerate(("tool.prepared", "tool.committed")):
            event = span.events.add(time_unix_nano=start + (step + 1) * 100_000, name=name)
            event.attributes.extend(
                [_kv("turnlens.hlc", hlc + step + 1), _kv("gen_ai.tool.call.id", f"call-{index}-{i}")]
            )
        span.status.code = 1
    return request


def decode_ceiling(bodies: list[bytes], spans_per_request: int, seconds: float = 2.0) -> tuple[float, float]:
    """Spans per wall second and per CPU second of protobuf's own ParseFromString (upb), same requests."""
    done, started, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - started < seconds:
        for body in bodies:
            ExportTraceServiceRequest.FromString(body)
            done += spans_per_request
    return done / (time.perf_counter() - started), done / (time.process_time() - cpu)


def turnlens_decode_rate(bodies: list[bytes], spans_per_request: int, seconds: float = 2.0) -> float:
    """Spans per CPU second of the collector's own decode to Arrow (after one warm-up pass, as in a
    running collector); no HTTP, no store."""
    from turnlens.collector.otlp_decode import decode_protobuf

    for body in bodies:
        decode_protobuf(body)
    done, started, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - started < seconds:
        for body in bodies:
            decode_protobuf(body)
            done += spans_per_request
    return done / (time.process_time() - cpu)


@dataclass
class SenderStats:
    acknowledged: int = 0
    refused: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def sender(address: tuple[str, int], bodies: list[bytes], offset: int, spans: int, stop: threading.Event,
           stats: SenderStats) -> None:
    """Sends pre-built requests back to back on one keep-alive connection; honours Retry-After."""
    connection = http.client.HTTPConnection(*address, timeout=60)
    i = offset
    headers = {"Content-Type": "application/x-protobuf"}
    while not stop.is_set():
        body = bodies[i % len(bodies)]
        i += 1
        sent = time.perf_counter()
        try:
            connection.request("POST", "/v1/traces", body=body, headers=headers)
            response = connection.getresponse()
            response.read()
        except OSError:
            with stats.lock:
                stats.errors += 1
            connection.close()
            connection = http.client.HTTPConnection(*address, timeout=60)
            continue
        with stats.lock:
            if response.status == 200:
                stats.acknowledged += spans
                stats.latencies.append(time.perf_counter() - sent)
            else:
                stats.refused += 1
        if response.status in (429, 503):
            time.sleep(float(response.getheader("Retry-After") or 1))
    connection.close()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_collector(store: Path, port: int, cpu: int | None) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "turnlens.cli", "collect", "--store", str(store),
               "--http", f"127.0.0.1:{port}", "--grpc", "off"]
    if cpu is not None and shutil.which("taskset"):
        command = ["taskset", "-c", str(cpu), *command]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "listening" in line:
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep the pipe drained
            return proc
    raise RuntimeError("turnlens collect did not start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="measured load duration")
    parser.add_argument("--warmup", type=float, default=3.0, help="load before measuring")
    parser.add_argument("--senders", type=int, default=4, help="concurrent HTTP connections")
    parser.add_argument("--spans", type=int, default=512, help="spans per request")
    parser.add_argument("--requests", type=int, default=64, help="distinct pre-built requests, sent in turn")
    parser.add_argument("--cpu", type=int, default=0, help="collector's core (taskset); -1: none")
    parser.add_argument("--store", type=Path, default=None, help="store directory (default: a temporary one)")
    args = parser.parse_args(argv)

    print(f"building {args.requests} requests of {args.spans} spans …", flush=True)
    bodies = [build_request(i, args.spans).SerializeToString() for i in range(args.requests)]
    print(f"  {sum(map(len, bodies)) / len(bodies) / 1024:.0f} KiB per request", flush=True)
    ceiling, ceiling_cpu = decode_ceiling(bodies, args.spans)
    own_decode = turnlens_decode_rate(bodies, args.spans)

    store = args.store or Path(tempfile.mkdtemp(prefix="turnlens-bench-"))
    port = free_port()
    proc = start_collector(store, port, None if args.cpu < 0 else args.cpu)
    collector = psutil.Process(proc.pid)
    if args.cpu >= 0:
        os.sched_setaffinity(0, {c for c in range(os.cpu_count() or 1) if c != args.cpu} or {args.cpu})
    peak_rss = 0
    sampling = threading.Event()

    def sample_rss() -> None:
        nonlocal peak_rss
        while not sampling.is_set():
            peak_rss = max(peak_rss, collector.memory_info().rss)
            time.sleep(0.1)

    threading.Thread(target=sample_rss, daemon=True).start()
    stats = SenderStats()
    stop = threading.Event()
    threads = [
        threading.Thread(target=sender, args=(("127.0.0.1", port), bodies, k * 7, args.spans, stop, stats))
        for k in range(args.senders)
    ]
    try:
        for thread in threads:
            thread.start()
        time.sleep(args.warmup)
        with stats.lock:
            acked_before, stats.latencies = stats.acknowledged, []
        cpu_before = sum(collector.cpu_times()[:2])
        started = time.perf_counter()
        time.sleep(args.seconds)
        with stats.lock:
            acked_window = stats.acknowledged - acked_before
        elapsed = time.perf_counter() - started
        cpu_used = sum(collector.cpu_times()[:2]) - cpu_before
        stop.set()
        for thread in threads:
            thread.join()
        acknowledged_total = stats.acknowledged
        last_ack = time.perf_counter()

        from turnlens.queries.catalog import connect

        distinct_spans = args.requests * args.spans  # requests repeat: the view counts each span once
        expected_visible = min(acknowledged_total, distinct_spans)
        queries, visible_after, query_s = 0, float("nan"), float("nan")
        while time.perf_counter() - last_ack < 60:
            queries += 1
            query_started = time.perf_counter()
            con = connect(store)
            raw = con.execute(
                "select count(*) from read_parquet($1)", [str(store / "segments" / "*" / "*.parquet")]
            ).fetchone()[0]
            visible = con.execute("select count(*) from spans").fetchone()[0]
            con.close()
            query_s = time.perf_counter() - query_started
            if raw >= acknowledged_total and visible >= expected_visible:
                visible_after = query_started - last_ack
                break
            time.sleep(0.1)
    finally:
        stop.set()
        sampling.set()
        proc.terminate()
        exit_code = proc.wait(60)
        if args.store is None:
            shutil.rmtree(store, ignore_errors=True)

    rate = acked_window / elapsed
    latencies = sorted(stats.latencies) or [float("nan")]
    print()
    print(f"collector pinned to core {args.cpu}; {args.senders} senders; {args.spans} spans/request; "
          f"{elapsed:.1f} s measured after {args.warmup:.0f} s warm-up")
    per_cpu_s = acked_window / max(cpu_used, 1e-9)
    print(f"  durable spans/s (acknowledged)     {rate:12,.0f}")
    print(f"  raw protobuf decode spans/s        {ceiling:12,.0f}   (ParseFromString in this process, wall)")
    print(f"  ratio durable / raw decode          {rate / ceiling:12.3f}")
    print(f"  collector CPU utilisation           {cpu_used / elapsed:12.2f}   cores (< 1: core shared)")
    print(f"  collector CPU s per 100k spans      {cpu_used / max(acked_window, 1) * 100_000:12.2f}")
    print(f"  durable spans per collector CPU s  {per_cpu_s:12,.0f}")
    print(f"  raw decode spans per CPU s         {ceiling_cpu:12,.0f}")
    print(f"  ratio per CPU second                {per_cpu_s / ceiling_cpu:12.3f}   (steadier when busy)")
    print(f"  turnlens decode per CPU s          {own_decode:12,.0f}   (to Arrow, no HTTP, no store)")
    print(f"  collector peak RSS                  {peak_rss / 2**20:12.0f}   MiB")
    print(f"  request latency p50 / p99          {latencies[len(latencies) // 2] * 1000:8.0f} / "
          f"{latencies[int(len(latencies) * 0.99)] * 1000:.0f} ms")
    print(f"  refused (429/503) / errors          {stats.refused:>8} / {stats.errors}")
    found = "yes" if visible_after == visible_after else "NO"
    print(f"  a reader counts all {acknowledged_total:,} acknowledged spans: {found}, "
          f"on query {queries} started {visible_after:.2f} s after the last ack (query took {query_s:.2f} s)")
    print(f"  collector exit code after SIGTERM   {exit_code:>8}")
    return 0 if visible_after == visible_after and exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
