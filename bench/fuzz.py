"""Fuzzer of the collector's receive path: malformed OTLP over real sockets against `turnlens collect`.

Each case is one request built from a valid one and then broken: protobuf mutations (bit flips,
truncations, inserted or duplicated fields, wrong wire types, bad lengths) sent over OTLP/HTTP or
OTLP/gRPC, OTLP/JSON with values of the wrong type or range, HTTP framing (Content-Length,
chunking, methods, headers) and gzip variants. Valid requests are mixed in. What must hold:
no answer is a 500 (nor a gRPC UNKNOWN or INTERNAL), the collector never dies, its memory stays
bounded, and every span it acknowledged is readable from the store once the run is over.

    .venv/bin/python bench/fuzz.py --cases 100000 --seed 1

prints a JSON summary: cases, answers by status, 5xx count, crashes, peak RSS, spans acknowledged and
missing. The collector tests run a few hundred cases of the same generator (tests/collector/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gzip
import http.client
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import psutil
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from turnlens.sample_data.otlp_values import kv, to_otlp_json

TOKEN = "fuzz-token"
MAX_REQUEST_BYTES = 1024 * 1024
MAX_INFLIGHT_BYTES = 8 * 1024 * 1024
READ_TIMEOUT_S = 1
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
START_NS = 1_795_000_000_000_000_000
SERVER_ERRORS = {"500", "grpc:UNKNOWN", "grpc:INTERNAL"}  # a bug, never a verdict on the request


# --- valid requests to start from ----------------------------------------------------------------


def valid_request(rng: random.Random, serial: int) -> ExportTraceServiceRequest:
    """A few spans with ids unique to `serial`, every attribute value kind, events, links and a status."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add(schema_url="https://opentelemetry.io/schemas/1.30.0")
    resource_spans.resource.attributes.extend(
        [kv("service.name", f"fuzz-{serial % 7}"), kv("service.instance.id", f"node-{serial % 3}")]
    )
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name, scope_spans.scope.version = "fuzz", "1"
    for i in range(rng.randint(1, 6)):
        span = scope_spans.spans.add()
        span.trace_id = serial.to_bytes(8, "big") + (i // 3 + 1).to_bytes(8, "big")
        span.span_id = serial.to_bytes(4, "big") + (i + 1).to_bytes(4, "big")
        if i:
            span.parent_span_id = serial.to_bytes(4, "big") + (1).to_bytes(4, "big")
        span.name, span.kind, span.flags = f"op-{i}", rng.randrange(6), 0x301
        span.trace_state = "vendor=fuzz"
        span.start_time_unix_nano = START_NS + serial * 1000 + i
        span.end_time_unix_nano = span.start_time_unix_nano + 5000
        span.attributes.extend(
            [
                kv("session.id", f"s-{serial % 11}"), kv("turnlens.turn.id", f"t-{serial}"),
                kv("turnlens.layer", rng.choice(["http", "stream", "runtime", "tool"])),
                kv("turnlens.hlc", ((START_NS // 10**6) << 16) + i), kv("flag", rng.random() < 0.5),
                kv("ratio", 0.25), kv("blob", b"\x00\x01"), kv("list", ["a", 1]), kv("map", {"k": "v"}),
                kv("empty", None),
            ]
        )
        event = span.events.add(time_unix_nano=span.start_time_unix_nano + 10, name="tool.committed")
        event.attributes.extend([kv("turnlens.hlc", 7), kv("turnlens.idempotency_key", f"k-{serial}")])
        link = span.links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, trace_state="l=1", flags=1)
        link.attributes.append(kv("why", "caused by"))
        span.status.code, span.status.message = rng.randrange(3), "fine"
    return request


# --- cases ----------------------------------------------------------------------------------------


@dataclass
class Case:
    """One request to send: raw bytes on a socket (HTTP) or a message (gRPC)."""

    family: str
    raw: bytes = b""  # a whole HTTP request, framing included
    grpc_body: bytes | None = None
    grpc_compression: grpc.Compression = grpc.Compression.NoCompression
    payload: bytes | None = None  # the trace request a 200 stores, when the framing is known to be sound
    json: bool = False


def http_request(body: bytes, *, json: bool = False, headers: dict[str, str | None] | None = None,
                 method: str = "POST", path: str = "/v1/traces") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: fuzz", f"Authorization: Bearer {TOKEN}",
             "Content-Type: " + ("application/json" if json else "application/x-protobuf"),
             "Connection: close"]
    merged: dict[str, str | None] = {"Content-Length": str(len(body)), **(headers or {})}
    lines += [f"{name}: {value}" for name, value in merged.items() if value is not None]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def mutate_protobuf(rng: random.Random, body: bytes) -> bytes:
    """One to three mutations: bytes changed, cut, copied in, a field inserted, a tag's wire type changed."""
    data = bytearray(body)
    for _ in range(rng.randint(1, 3)):
        if not data:
            break
        kind = rng.random()
        at = rng.randrange(len(data))
        if kind < 0.3:
            data[at] ^= 1 << rng.randrange(8)
        elif kind < 0.45:
            data[at] = rng.choice((0x00, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif kind < 0.55:
            del data[rng.randrange(len(data)):]
        elif kind < 0.7:
            source = rng.randrange(len(data))
            data[at:at] = data[source : source + rng.randint(1, 40)]
        elif kind < 0.85:
            number = rng.choice((rng.randint(1, 20), rng.randint(1, 2**29 - 1)))
            wire = rng.choice((0, 1, 2, 3, 4, 5))
            payload = {0: _varint(rng.getrandbits(64)), 1: rng.randbytes(8), 5: rng.randbytes(4),
                       2: _varint(3) + b"abc"}.get(wire, b"")
            data[at:at] = _varint(number << 3 | wire) + payload
        else:
            data[at] = (data[at] & ~7) | rng.choice((0, 1, 2, 3, 4, 5, 6, 7))
    return bytes(data)


_WRONG_VALUES: tuple[Any, ...] = (
    None, True, False, 0, -1, 2**32, 2**63, 2**64, -(2**63) - 1, 1.5, float(2**70), "", "x", "12", "-3",
    "0x10", "\u00e9", [], [1, "a"], {}, {"stringValue": 5}, {"intValue": "1e3"}, {"boolValue": "yes"},
    {"doubleValue": []}, {"arrayValue": {"values": 5}}, {"kvlistValue": []}, {"bytesValue": "@@"},
)


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*path, index))


def mutate_json(rng: random.Random, document: dict[str, Any]) -> bytes:
    """A value of the wrong type or range somewhere, a key removed, or the text itself broken."""
    document = copy.deepcopy(document)
    for _ in range(rng.randint(1, 2)):
        paths = [p for p in _paths(document) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        if rng.random() < 0.85:
            parent[path[-1]] = rng.choice(_WRONG_VALUES)
        elif isinstance(parent, dict):
            parent.pop(path[-1], None)
    text = json.dumps(document).encode()
    if rng.random() < 0.1:
        text = mutate_protobuf(rng, text)  # byte-level damage to the JSON text
    return text


def _gzip_variant(rng: random.Random, body: bytes) -> tuple[bytes, dict[str, str | None], bool]:
    """(encoded body, headers, whether a 200 stores exactly `body`)."""
    packed = gzip.compress(body)
    choice = rng.randrange(9)
    if choice == 0:
        return packed, {"Content-Encoding": "gzip"}, True
    if choice == 1:
        cut = rng.randrange(len(body) + 1)
        return gzip.compress(body[:cut]) + gzip.compress(body[cut:]), {"Content-Encoding": "gzip"}, True
    if choice == 2:
        trailer = rng.choice((b"garbage", b"\x1f\x8b", b"\x00" * 4))
        return packed + trailer, {"Content-Encoding": "gzip"}, False
    if choice == 3:
        return packed[: rng.randrange(len(packed))], {"Content-Encoding": "gzip"}, False
    if choice == 4:
        damaged = bytearray(packed)
        damaged[-8 + rng.randrange(8)] ^= 0xFF  # the CRC or the length
        return bytes(damaged), {"Content-Encoding": "gzip"}, False
    if choice == 5:
        return zlib.compress(body), {"Content-Encoding": "gzip"}, False  # zlib framing, not gzip
    if choice == 6:
        return packed, {"Content-Encoding": rng.choice(("br", "deflate", "GZIP, identity", ""))}, False
    if choice == 7:
        bomb = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return bomb.compress(bytes(3 * MAX_REQUEST_BYTES)) + bomb.flush(), {"Content-Encoding": "gzip"}, False
    return packed, {"Content-Encoding": "x-gzip"}, True


def _chunked(body: bytes, rng: random.Random) -> bytes:
    out, at = bytearray(), 0
    while at < len(body):
        size = rng.randint(1, 4096)
        out += f"{size:x}".encode() + b"\r\n" + body[at : at + size] + b"\r\n"
        at += size
    return bytes(out + b"0\r\n\r\n")


def framing_case(rng: random.Random, body: bytes) -> Case:
    """A valid body in broken (or unusual but valid) HTTP framing."""
    n = len(body)
    choice = rng.randrange(16)
    sound = False
    if choice == 0:
        length = rng.choice(("-1", "1_0", "+5", " 5", "5x", "0x10", "٥"))
        raw = http_request(body, headers={"Content-Length": length})
    elif choice == 1:
        raw = http_request(body, headers={"Content-Length": f"{n}, {n + 1}"})
    elif choice == 2:
        raw = http_request(body, headers={"Content-Length": str(n + rng.randint(1, 1000))})
    elif choice == 3:
        raw = http_request(body, headers={"Content-Length": str(max(0, n - rng.randint(1, 10)))})
    elif choice == 4:
        raw, sound = http_request(_chunked(body, rng), headers={"Content-Length": None,
                                                                 "Transfer-Encoding": "chunked"}), True
    elif choice == 5:
        chunked = bytearray(_chunked(body, rng))
        chunked[rng.randrange(len(chunked))] = rng.choice(b"-xg; \r\n")
        raw = http_request(bytes(chunked), headers={"Content-Length": None, "Transfer-Encoding": "chunked"})
    elif choice == 6:
        coding = rng.choice(("gzip, chunked", "identity", "chunked"))
        raw = http_request(body, headers={"Transfer-Encoding": coding})
    elif choice == 7:
        method = rng.choice(("GET", "PUT", "BREW", "DELETE", "OPTIONS", "HEAD", "TRACE"))
        raw = http_request(body, method=method)
    elif choice == 8:
        raw = http_request(body, path=rng.choice(("/v1/trace", "/", "/v1/traces/../x", "/v1/logs", "*")))
    elif choice == 9:
        raw = http_request(body, headers={f"X-{i}": "y" for i in range(rng.choice((50, 101, 200)))})
    elif choice == 10:
        raw = http_request(body, headers={"X-Long": "y" * rng.choice((1000, 70_000))})
    elif choice == 11:
        authorization = rng.choice(("Bearer tökén", "Basic x", "Bearer", ""))
        raw = http_request(body, headers={"Authorization": authorization})
    elif choice == 12:
        content_type = rng.choice(("text/plain", "", "application/x-protobuf; x"))
        raw = http_request(body, headers={"Content-Type": content_type})
    elif choice == 13:
        version = rng.choice((b"HTTP/2.0", b"HTTP/1.1x", b"HTTP/0.9", b""))
        raw = http_request(body).replace(b"HTTP/1.1", version, 1)
    elif choice == 14:
        raw = rng.randbytes(rng.randint(1, 300)) + b"\r\n\r\n"
    else:
        raw, sound = http_request(body, headers={"Expect": "100-continue"}), True
    return Case("framing", raw=raw, payload=body if sound else None)


def make_case(rng: random.Random, serial: int) -> Case:
    """One case of a random family; about one in ten is a valid request."""
    request = valid_request(rng, serial)
    body = request.SerializeToString()
    family = rng.random()
    if family < 0.1:
        if rng.random() < 0.5:
            return Case("valid", raw=http_request(body), payload=body)
        document = json.dumps(to_otlp_json(request)).encode()
        return Case("valid", raw=http_request(document, json=True), payload=document, json=True)
    if family < 0.4:
        mutated = mutate_protobuf(rng, body)
        return Case("protobuf", raw=http_request(mutated), payload=mutated)
    if family < 0.55:
        mutated = mutate_protobuf(rng, body)
        compression = rng.choice((grpc.Compression.NoCompression, grpc.Compression.Gzip))
        return Case("grpc", grpc_body=mutated, grpc_compression=compression, payload=mutated)
    if family < 0.75:
        text = mutate_json(rng, to_otlp_json(request))
        return Case("json", raw=http_request(text, json=True), payload=text, json=True)
    if family < 0.9:
        return framing_case(rng, body)
    encoded, headers, sound = _gzip_variant(rng, body)
    return Case("gzip", raw=http_request(encoded, headers=headers), payload=body if sound else None)


# --- the collector --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Collector:
    """`turnlens collect` in a subprocess on free 127.0.0.1 ports, its RSS sampled while it runs."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.http = ("127.0.0.1", free_port())
        self.grpc = f"127.0.0.1:{free_port()}"
        command = [
            sys.executable, "-m", "turnlens.cli", "collect", "--store", str(store),
            "--http", "{}:{}".format(*self.http), "--grpc", self.grpc, "--token", TOKEN,
            "--max-request-bytes", str(MAX_REQUEST_BYTES), "--max-inflight-bytes", str(MAX_INFLIGHT_BYTES),
            "--read-timeout", f"{READ_TIMEOUT_S}s", "--materialize-interval", "off",
        ]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output: list[str] = []
        ready = threading.Event()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line.rstrip("\n"))
                if "listening" in line:
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + 60
        while not ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("turnlens collect did not start:\n" + "\n".join(self.output))
        self.peak_rss = 0
        self._stop = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        process = psutil.Process(self.proc.pid)
        while not self._stop.wait(0.05):
            with contextlib.suppress(psutil.Error):
                self.peak_rss = max(self.peak_rss, process.memory_info().rss)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        self._stop.set()
        if self.alive():
            self.proc.terminate()
        return self.proc.wait(60)


# --- sending and judging --------------------------------------------------------------------------


def send_http(address: tuple[str, int], raw: bytes) -> str:
    """The status of the answer to `raw`, or why there was none."""
    try:
        with socket.create_connection(address, timeout=READ_TIMEOUT_S + 10) as sock:
            with contextlib.suppress(OSError):  # the collector may answer (and close) before reading it all
                sock.sendall(raw)
                sock.shutdown(socket.SHUT_WR)  # a body shorter than announced ends here, not at the timeout
            response = http.client.HTTPResponse(sock, method=raw.split(b" ", 1)[0].decode("latin-1"))
            response.begin()
            response.read()
            return str(response.status)
    except (http.client.HTTPException, ConnectionError) as exc:
        return f"no answer: {type(exc).__name__}"
    except TimeoutError:
        return "no answer: timeout"


def send_grpc(channel: grpc.Channel, case: Case) -> str:
    try:
        channel.unary_unary(EXPORT)(
            case.grpc_body, metadata=[("authorization", f"Bearer {TOKEN}")], timeout=30,
            compression=case.grpc_compression,
        )
        return "grpc:OK"
    except grpc.RpcError as error:
        return f"grpc:{error.code().name}"  # type: ignore[attr-defined]


def stored_ids(payload: bytes, *, json_body: bool) -> set[tuple[str, str]]:
    """(trace_id, span_id) of the spans a 200 to this payload stored, by the collector's own decoder."""
    from turnlens.collector.otlp_decode import OtlpDecodeError, decode_json, decode_protobuf

    try:
        result = decode_json(payload) if json_body else decode_protobuf(payload)
    except OtlpDecodeError:
        return set()
    table = result.table
    return set(zip(table["trace_id"].to_pylist(), table["span_id"].to_pylist(), strict=True))


@dataclass
class Summary:
    cases: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    by_family: dict[str, Counter[str]] = field(default_factory=dict)
    crashes: int = 0
    peak_rss_mib: float = 0.0
    acknowledged_spans: int = 0
    missing_spans: int = 0
    seconds: float = 0.0
    examples: dict[str, str] = field(default_factory=dict)  # a 5xx case's bytes (hex, cut), by status

    @property
    def server_errors(self) -> int:
        return sum(count for status, count in self.answers.items() if status in SERVER_ERRORS)

    @property
    def any_5xx(self) -> int:
        """Every 5xx, the protocol's own included (501 transfer coding, 503 shutting down, 505 version)."""
        return sum(count for status, count in self.answers.items() if status.startswith("5"))

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases, "seconds": round(self.seconds, 1),
            "answers": dict(self.answers.most_common()),
            "answers_5xx": self.any_5xx, "server_errors_500": self.server_errors, "crashes": self.crashes,
            "peak_rss_mib": round(self.peak_rss_mib, 1), "acknowledged_spans": self.acknowledged_spans,
            "missing_spans": self.missing_spans,
            "by_family": {name: dict(seen.most_common()) for name, seen in sorted(self.by_family.items())},
            "examples": self.examples,
        }


def run(cases: int, seed: int, store: Path, *, workers: int = 6,
        progress: Callable[[int], None] | None = None) -> Summary:
    """Sends `cases` cases from `workers` threads to a fresh collector on `store`, then checks the store."""
    rng = random.Random(seed)
    summary = Summary()
    acknowledged: set[tuple[str, str]] = set()
    lock = threading.Lock()
    collector = Collector(store)
    started = time.monotonic()
    channel = grpc.insecure_channel(
        collector.grpc, options=[("grpc.max_send_message_length", 8 * MAX_REQUEST_BYTES)]
    )

    def one(case: Case) -> None:
        if case.grpc_body is not None:
            status = send_grpc(channel, case)
        else:
            status = send_http(collector.http, case.raw)
        acknowledged_now = status in ("200", "grpc:OK") and case.payload is not None
        ids = stored_ids(case.payload or b"", json_body=case.json) if acknowledged_now else set()
        with lock:
            summary.cases += 1
            summary.answers[status] += 1
            summary.by_family.setdefault(case.family, Counter())[status] += 1
            acknowledged.update(ids)
            if status in SERVER_ERRORS and status not in summary.examples:
                summary.examples[status] = (case.raw or case.grpc_body or b"")[:2000].hex()

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            batch = 200
            for first in range(0, cases, batch):
                list(pool.map(one, [make_case(rng, first + k + 1) for k in range(min(batch, cases - first))]))
                if not collector.alive():
                    summary.crashes += 1
                    summary.examples["crash"] = "\n".join(collector.output[-30:])
                    break
                if progress:
                    progress(summary.cases)
    finally:
        channel.close()
        summary.seconds = time.monotonic() - started
        summary.peak_rss_mib = collector.peak_rss / 2**20
        if collector.alive() and collector.stop() != 0:
            summary.crashes += 1
    summary.acknowledged_spans = len(acknowledged)
    summary.missing_spans = len(acknowledged - readable(store, acknowledged))
    return summary


def readable(store: Path, wanted: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which of these spans the store's views return, read as an analyst would."""
    from turnlens.queries.catalog import connect

    if not wanted:
        return set()
    connection = connect(store)
    try:
        rows = connection.execute(
            "select trace_id, span_id from spans where span_id in (select unnest($1))",
            [sorted({span for _, span in wanted})],
        ).fetchall()
    finally:
        connection.close()
    return {(trace, span) for trace, span in rows} & wanted


def _progress(done: int) -> None:
    if done % 5000 == 0:
        print(f"{done} cases", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=6, help="threads sending at once")
    parser.add_argument("--store", type=Path, default=None, help="store directory (default: a temporary one)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="turnlens-fuzz-"))
    store = args.store or root / "store"
    try:
        summary = run(args.cases, args.seed, store, workers=args.workers, progress=_progress)
    finally:
        if args.store is None:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(summary.to_json(), indent=2))
    ok = not summary.server_errors and not summary.crashes and not summary.missing_spans
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
