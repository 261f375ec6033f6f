"""OTLP requests for the collector tests, and a real `turnlens collect` process to send them to.

Imported by the tests (pyproject's pytest `pythonpath` puts this folder on sys.path); also run by the
reader/sender helper processes of the crash tests.
"""

from __future__ import annotations

import base64
import http.client
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from turnlens.sample_data.otlp_values import any_value as any_value  # the tests build values with these
from turnlens.sample_data.otlp_values import kv as kv
from turnlens.sample_data.otlp_values import to_otlp_json as to_otlp_json

REPO = Path(__file__).resolve().parents[2]
TURNLENS = [sys.executable, "-m", "turnlens.cli"]


# --- requests -----------------------------------------------------------------------------------


# Every kind of attribute value, and the JSON each must become.
ALL_VALUE_KINDS: dict[str, Any] = {
    "s": "text with \"quotes\" and ünïcode",
    "b": True,
    "i": -(2**62),
    "d": 0.25,
    "bytes": b"\x00\x01\xfe",
    "arr": ["a", 1, False],
    "kv": {"inner": "x", "n": 2},
    "empty": None,
}
ALL_VALUE_KINDS_JSON: dict[str, Any] = {
    **ALL_VALUE_KINDS,
    "bytes": base64.b64encode(b"\x00\x01\xfe").decode(),
}

TRACE_ID = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
SPAN_ID = bytes.fromhex("b7ad6b7169203331")
PARENT_ID = bytes.fromhex("00f067aa0ba902b7")
LINK_TRACE_ID = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")
LINK_SPAN_ID = bytes.fromhex("53995c3f42cd8ad8")
START = 1_795_000_000_123_456_789
HLC = (1_795_000_000_123 << 16) | 7


def full_request() -> ExportTraceServiceRequest:
    """One span with every OTLP field set to a value distinguishable from its default."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add(schema_url="https://opentelemetry.io/schemas/1.30.0")
    resource = resource_spans.resource
    resource.attributes.extend(
        [kv("service.name", "payments"), kv("service.instance.id", "payments-7"), kv("host.name", "h1")]
    )
    resource.dropped_attributes_count = 3
    scope_spans = resource_spans.scope_spans.add(schema_url="https://opentelemetry.io/schemas/1.31.0")
    scope_spans.scope.name = "agent.runtime"
    scope_spans.scope.version = "2.1.0"
    scope_spans.scope.attributes.append(kv("scope.attr", "yes"))
    scope_spans.scope.dropped_attributes_count = 4
    span = scope_spans.spans.add()
    span.trace_id = TRACE_ID
    span.span_id = SPAN_ID
    span.parent_span_id = PARENT_ID
    span.trace_state = "vendor=opaque"
    span.flags = 0x301
    span.name = "execute_tool send_invoice"
    span.kind = 3  # client
    span.start_time_unix_nano = START
    span.end_time_unix_nano = START + 5_000_000
    span.attributes.extend(
        [
            kv("gen_ai.conversation.id", "conv-1"),
            kv("turnlens.turn.id", "turn-1"),
            kv("turnlens.hlc", str(HLC)),  # string-encoded ints are accepted
            kv("gen_ai.operation.name", "execute_tool"),
            *[kv(key, value) for key, value in ALL_VALUE_KINDS.items()],
        ]
    )
    span.dropped_attributes_count = 5
    event = span.events.add(time_unix_nano=START + 1000, name="tool.committed")
    event.attributes.extend([kv("turnlens.hlc", HLC + 1), kv("turnlens.idempotency_key", "k-1")])
    event.dropped_attributes_count = 6
    span.dropped_events_count = 7
    link = span.links.add(trace_id=LINK_TRACE_ID, span_id=LINK_SPAN_ID, trace_state="l=1", flags=0x100)
    link.attributes.append(kv("link.attr", 9))
    link.dropped_attributes_count = 8
    span.dropped_links_count = 9
    span.status.code = 2
    span.status.message = "relay said no"
    return request


def simple_request(n: int, *, seed: int = 0, service: str = "svc") -> ExportTraceServiceRequest:
    """`n` small valid spans with distinct ids derived from `seed`."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(kv("service.name", service))
    scope_spans = resource_spans.scope_spans.add()
    for i in range(n):
        span = scope_spans.spans.add()
        span.trace_id = seed.to_bytes(8, "big") + (i // 4 + 1).to_bytes(8, "big")
        span.span_id = seed.to_bytes(4, "big") + (i + 1).to_bytes(4, "big")
        span.name = f"span-{i}"
        span.start_time_unix_nano = START + i
        span.end_time_unix_nano = START + i + 1000
        span.attributes.extend([kv("session.id", f"s-{seed}"), kv("turnlens.hlc", HLC + i)])
    return request


def span_ids(request: ExportTraceServiceRequest) -> set[str]:
    return {
        span.span_id.hex()
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    }


# The OTLP specification's own example (opentelemetry-proto, examples/trace.json): upper-case hex
# ids, a number where the JSON mapping uses a string, an integer kind.
SPEC_EXAMPLE_JSON = b"""{
  "resourceSpans": [{
    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "my.service"}}]},
    "scopeSpans": [{
      "scope": {
        "name": "my.library", "version": "1.0.0",
        "attributes": [{"key": "my.scope.attribute", "value": {"stringValue": "some scope attribute"}}]
      },
      "spans": [{
        "traceId": "5B8EFFF798038103D269B633813FC60C",
        "spanId": "EEE19B7EC3C1B174",
        "parentSpanId": "EEE19B7EC3C1B173",
        "name": "I'm a server span",
        "startTimeUnixNano": 1544712660000000000,
        "endTimeUnixNano": 1544712661000000000,
        "kind": 2,
        "attributes": [{"key": "my.span.attr", "value": {"stringValue": "some value"}}]
      }]
    }]
  }]
}"""


# --- a real collector process --------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class CollectorProcess:
    """`turnlens collect` in a subprocess, started and waited for like a user would. `prefix`: a command it
    runs under (as `nsenter` puts it in the mount namespace of another "machine")."""

    def __init__(
        self, store: Path, *args: str, env: dict[str, str] | None = None, prefix: Sequence[str] = ()
    ) -> None:
        self.store = store
        self.prefix = tuple(prefix)
        self.http_port = free_port()
        self.grpc_port = free_port()
        self.args = args
        self.env = env
        self.lines: list[str] = []
        self.proc: subprocess.Popen[str] | None = None

    @property
    def http(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self, timeout_s: float = 60.0, attempts: int = 3) -> CollectorProcess:
        """Starts the process and waits until it listens. A port free_port found free can be taken by another
        process before the collector binds it (the suite runs in two workers): then it starts again on new
        ports, at most `attempts` times in all."""
        for attempt in range(attempts):
            try:
                return self._start(timeout_s)
            except RuntimeError:
                if attempt + 1 == attempts or "Address already in use" not in self.output():
                    raise
                if self.proc is not None and self.proc.poll() is None:
                    self.kill()
                self.http_port, self.grpc_port = free_port(), free_port()
        raise AssertionError("unreachable")  # the loop returns or raises

    def _start(self, timeout_s: float) -> CollectorProcess:
        command = [
            *self.prefix, *TURNLENS, "collect", "--store", str(self.store),
            "--http", self.http, "--grpc", self.grpc, *self.args,
        ]
        env = {**os.environ, **(self.env or {})}
        self.lines = []
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
                if "listening" in line:
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while not ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("turnlens collect did not start:\n" + "\n".join(self.lines))
        return self

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def output(self) -> str:
        return "\n".join(self.lines)


def post(
    address: str, path: str, body: bytes, headers: dict[str, str] | None = None, method: str = "POST"
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request on a fresh connection: (status, headers, body)."""
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def protobuf_headers(token: str | None = None, **extra: str) -> dict[str, str]:
    headers = {"Content-Type": "application/x-protobuf", **extra}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def json_headers(token: str | None = None, **extra: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", **extra}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def query(store: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Runs SQL on the store's catalog the way an analyst would (read-only DuckDB)."""
    from turnlens.queries.catalog import connect

    con = connect(store)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def counted_spans(output: str) -> int:
    match = re.search(r"(\d+) spans stored", output)
    return int(match.group(1)) if match else -1
