"""Peak memory of `turnlens collect` while many OTLP/gRPC connections send large messages at once.

Each connection is its own gRPC channel (its own TCP connection, as separate exporters have) and starts
`--calls` Export calls of about `--message-mib` MiB at the same moment. A call answered UNAVAILABLE is
sent again after its RetryInfo delay, as OTLP exporters do, until `--seconds` have passed. The collector's
resident memory is sampled every 20 ms. At the end every span of every call answered OK is looked up in
the store: acknowledged spans must all be there.

    .venv/bin/python bench/grpc_memory.py --connections 64 --calls 4 --message-mib 4 --json

prints one JSON object: the collector's peak and starting RSS, answers by status, spans acknowledged and
missing, and the 1-minute load average before and after. Collector flags can be added after `--`.
Figures and what they mean: docs/collector-limits.md (gRPC).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import grpc
import psutil
from google.rpc import error_details_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

REPO = Path(__file__).resolve().parents[1]
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
MIB = 1024 * 1024
SPANS_PER_MESSAGE = 32
START_NS = 1_795_000_000_000_000_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def message(serial: int, size: int) -> tuple[bytes, list[str]]:
    """An Export request of about `size` bytes: SPANS_PER_MESSAGE spans with one large attribute each."""
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="grpc-mem")))
    scope = resource.scope_spans.add()
    filler = "x" * max(1, size // SPANS_PER_MESSAGE - 100)
    ids = []
    for k in range(SPANS_PER_MESSAGE):
        span = scope.spans.add()
        span.trace_id = serial.to_bytes(8, "big") + (1).to_bytes(8, "big")
        span.span_id = (serial * SPANS_PER_MESSAGE + k + 1).to_bytes(8, "big")
        span.name = "big"
        span.start_time_unix_nano = START_NS + serial
        span.end_time_unix_nano = START_NS + serial + 1000
        span.attributes.append(KeyValue(key="payload", value=AnyValue(string_value=filler)))
        ids.append(span.span_id.hex())
    return request.SerializeToString(), ids


def retry_delay(error: grpc.RpcError) -> float:
    for key, value in error.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "google.rpc.retryinfo-bin":
            delay = error_details_pb2.RetryInfo.FromString(value).retry_delay
            return float(delay.seconds + delay.nanos / 1e9)
    return 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=64, help="gRPC connections sending at once")
    parser.add_argument("--calls", type=int, default=4, help="concurrent Export calls per connection")
    parser.add_argument("--message-mib", type=float, default=4.0, help="size of each Export message")
    parser.add_argument(
        "--refused", action="store_true",
        help="send bodies the decoder refuses at their first byte (INVALID_ARGUMENT): memory held by "
        "receiving alone, without the store's backlog",
    )
    parser.add_argument("--seconds", type=float, default=120.0, help="give up retrying after this long")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")
    parser.add_argument("collector_args", nargs="*", help="extra `turnlens collect` flags (after --)")
    args = parser.parse_args(argv)

    def say(text: str) -> None:
        if not args.json:
            print(text, file=sys.stderr, flush=True)

    store = Path(tempfile.mkdtemp(prefix="turnlens-grpc-mem-"))
    port = free_port()
    command = [
        sys.executable, "-m", "turnlens.cli", "collect", "--store", str(store / "store"), "--http", "off",
        "--grpc", f"127.0.0.1:{port}", "--compact-interval", "1h", "--materialize-interval", "off",
        *args.collector_args,
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "listening" in line:
            break
    else:
        raise SystemExit(f"the collector did not start (exit {proc.wait()})")
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    collector = psutil.Process(proc.pid)
    time.sleep(1.0)
    load_before = os.getloadavg()[0]
    start_rss = collector.memory_info().rss
    peak_rss = start_rss
    sampling = threading.Event()

    def sample() -> None:
        nonlocal peak_rss
        while not sampling.is_set():
            try:
                peak_rss = max(peak_rss, collector.memory_info().rss)
            except psutil.NoSuchProcess:
                return
            time.sleep(0.02)

    threading.Thread(target=sample, daemon=True).start()
    size = int(args.message_mib * MIB)
    outcomes: Counter[str] = Counter()
    acknowledged: list[str] = []
    lock = threading.Lock()
    go = threading.Barrier(args.connections)
    deadline = time.monotonic() + args.seconds

    def connection(index: int) -> None:
        options = [
            ("grpc.max_send_message_length", 2 * size),
            ("grpc.use_local_subchannel_pool", 1),  # its own TCP connection, not one shared with the others
        ]
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
            export = channel.unary_unary(EXPORT)
            go.wait(60)  # every connection's calls start together (a connection past a cap fails then)
            pending = list(range(args.calls))
            while pending and time.monotonic() < deadline:
                calls = []
                for k in pending:
                    serial = index * args.calls + k
                    body, ids = (b"\x00" * size, []) if args.refused else message(serial, size)
                    calls.append((k, ids, export.future(body, timeout=60)))
                    del body
                retry, wait_s = [], 0.0
                for k, ids, future in calls:
                    try:
                        future.result()
                        with lock:
                            outcomes["OK"] += 1
                            acknowledged.extend(ids)
                    except grpc.RpcError as error:
                        code = error.code().name  # type: ignore[attr-defined]
                        with lock:
                            outcomes[code] += 1
                        if code == "UNAVAILABLE":
                            retry.append(k)
                            wait_s = max(wait_s, retry_delay(error))
                pending = retry
                time.sleep(wait_s)

    started = time.monotonic()
    threads = [threading.Thread(target=connection, args=(i,)) for i in range(args.connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    time.sleep(0.5)
    sampling.set()
    proc.terminate()
    proc.wait(60)
    sys.path.insert(0, str(REPO))
    from turnlens.queries.catalog import connect

    con = connect(store / "store")
    found = {
        row[0]
        for row in con.execute(
            "select span_id from spans where span_id in (select unnest($1))", [acknowledged]
        ).fetchall()
    }
    con.close()
    shutil.rmtree(store, ignore_errors=True)
    summary = {
        "connections": args.connections,
        "calls_per_connection": args.calls,
        "message_bytes": size,
        "collector_args": args.collector_args,
        "collector_start_rss_mib": round(start_rss / MIB, 1),
        "collector_peak_rss_mib": round(peak_rss / MIB, 1),
        "answers": dict(outcomes),
        "seconds": round(elapsed, 1),
        "acknowledged_spans": len(acknowledged),
        "missing_acknowledged_spans": len(set(acknowledged) - found),
        "load_1min_before": round(load_before, 2),
        "load_1min_after": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(summary) if args.json else json.dumps(summary, indent=2))
    return 0 if summary["missing_acknowledged_spans"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
