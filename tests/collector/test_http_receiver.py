"""OTLP/HTTP against a real `turnlens collect`: the official exporter, the spec's JSON, every status."""

from __future__ import annotations

import gzip
import json
import socket
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import orjson
import otlp_samples as s
import psutil
import pytest
from google.rpc import status_pb2
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

TOKEN = "s3cret-token"
LIMIT = 1024 * 1024  # --max-request-bytes for this module's collector
INFLIGHT = 256 * 1024  # --max-inflight-bytes
READ_TIMEOUT_S = 3  # --read-timeout
HEADER_TIMEOUT_S = 2  # --header-timeout


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s.CollectorProcess]:
    process = s.CollectorProcess(
        tmp_path_factory.mktemp("http") / "store",
        "--token", TOKEN, "--max-request-bytes", str(LIMIT), "--max-inflight-bytes", str(INFLIGHT),
        "--read-timeout", f"{READ_TIMEOUT_S}s", "--header-timeout", f"{HEADER_TIMEOUT_S}s",
    ).start()
    yield process
    assert process.stop() == 0, process.output()


def send(collector: s.CollectorProcess, body: bytes, **headers: str) -> tuple[int, dict[str, str], bytes]:
    return s.post(collector.http, "/v1/traces", body, s.protobuf_headers(TOKEN, **headers))


def stored(collector: s.CollectorProcess, span_ids: set[str]) -> int:
    """How many of these spans the store holds."""
    sql = "select count(*) from spans where span_id in (select unnest($1))"
    return int(s.query(collector.store, sql, [sorted(span_ids)])[0][0])


def still_serving(collector: s.CollectorProcess) -> None:
    request = s.simple_request(3, seed=int(time.time_ns() % 1_000_000_000))
    status, _, body = send(collector, request.SerializeToString())
    assert status == 200, body
    ids = sorted(s.span_ids(request))
    found = s.query(
        collector.store, "select span_id from spans where span_id in (select unnest($1)) order by 1", [ids]
    )
    assert [row[0] for row in found] == ids


def test_the_official_http_exporter_delivers_spans_events_and_links(collector: s.CollectorProcess) -> None:
    resource = Resource.create({"service.name": "sdk-http", "service.instance.id": "n1"})
    provider = TracerProvider(resource=resource)
    exporter = OTLPSpanExporter(
        endpoint=f"http://{collector.http}/v1/traces",
        headers={"Authorization": f"Bearer {TOKEN}"},
        compression=Compression.Gzip,
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.http")
    turn = {"session.id": "sess-http", "turnlens.turn.id": "t1"}
    with tracer.start_as_current_span("turn", attributes=turn):
        with tracer.start_as_current_span(
            "execute_tool refund",
            attributes={"gen_ai.operation.name": "execute_tool", "turnlens.hlc": 77 << 16},
            links=[trace.Link(trace.get_current_span().get_span_context(), {"why": "caused by"})],
        ) as tool:
            tool.add_event("tool.committed", {"turnlens.hlc": (77 << 16) + 1})
    provider.shutdown()
    rows = s.query(
        collector.store,
        "select name, layer, node, hlc, session_id, turn_id, len(links), parent_span_id is null "
        "from spans where service_name = 'sdk-http' order by name",
    )
    assert rows == [
        ("execute_tool refund", "tool", "n1", 77 << 16, "sess-http", "t1", 1, False),
        ("turn", None, "n1", None, "sess-http", "t1", 0, True),
    ]
    events = s.query(collector.store, "select name, hlc from span_events where service_name = 'sdk-http'")
    assert events == [("tool.committed", (77 << 16) + 1)]


def test_every_field_of_a_protobuf_request_arrives(collector: s.CollectorProcess) -> None:
    status, headers, body = send(collector, s.full_request().SerializeToString())
    assert status == 200 and headers["content-type"] == "application/x-protobuf"
    assert ExportTraceServiceResponse.FromString(body) == ExportTraceServiceResponse()
    [row] = s.query(
        collector.store,
        "select trace_id, span_id, parent_span_id, trace_state, flags, name, kind, start_time_unix_nano, "
        "end_time_unix_nano, attributes, dropped_attributes_count, dropped_events_count, "
        "dropped_links_count, "
        "status_code, status_message, resource_attributes, resource_dropped_attributes_count, "
        "resource_schema_url, scope_name, scope_version, scope_attributes, scope_dropped_attributes_count, "
        "scope_schema_url, service_name, node, session_id, turn_id, layer, hlc from spans where span_id = $1",
        [s.SPAN_ID.hex()],
    )
    assert row[:9] == (
        s.TRACE_ID.hex(), s.SPAN_ID.hex(), s.PARENT_ID.hex(), "vendor=opaque", 0x301,
        "execute_tool send_invoice", "client", s.START, s.START + 5_000_000,
    )
    attributes = json.loads(row[9])
    assert {key: attributes[key] for key in s.ALL_VALUE_KINDS_JSON} == s.ALL_VALUE_KINDS_JSON
    assert row[10:15] == (5, 7, 9, "error", "relay said no")
    assert json.loads(row[15])["service.instance.id"] == "payments-7"
    assert row[16:20] == (3, "https://opentelemetry.io/schemas/1.30.0", "agent.runtime", "2.1.0")
    assert (json.loads(row[20]), row[21], row[22]) == (
        {"scope.attr": "yes"}, 4, "https://opentelemetry.io/schemas/1.31.0",
    )
    assert row[23:] == ("payments", "payments-7", "conv-1", "turn-1", "tool", s.HLC)
    [event] = s.query(
        collector.store,
        "select name, time_unix_nano, attributes, dropped_attributes_count, hlc from span_events "
        "where span_id = $1",
        [s.SPAN_ID.hex()],
    )
    assert event[:2] == ("tool.committed", s.START + 1000) and event[3:] == (6, s.HLC + 1)
    assert json.loads(event[2])["turnlens.idempotency_key"] == "k-1"
    [link] = s.query(collector.store, "select * from span_links where span_id = $1", [s.SPAN_ID.hex()])
    assert s.LINK_TRACE_ID.hex() in link and s.LINK_SPAN_ID.hex() in link and "l=1" in link and 0x100 in link


def test_the_specification_json_example_is_stored_and_answered_in_json(collector: s.CollectorProcess) -> None:
    status, headers, body = s.post(collector.http, "/v1/traces", s.SPEC_EXAMPLE_JSON, s.json_headers(TOKEN))
    assert status == 200 and headers["content-type"] == "application/json"
    assert orjson.loads(body) == {}
    rows = s.query(
        collector.store, "select name, kind, scope_name from spans where span_id = 'eee19b7ec3c1b174'"
    )
    assert rows == [("I'm a server span", "server", "my.library")]


def test_gzip_json_is_accepted(collector: s.CollectorProcess) -> None:
    request = s.simple_request(2, seed=4242)
    body = gzip.compress(orjson.dumps(s.to_otlp_json(request)))
    status, _, _ = s.post(
        collector.http, "/v1/traces", body, s.json_headers(TOKEN, **{"Content-Encoding": "gzip"})
    )
    assert status == 200
    found = s.query(collector.store, "select count(*) from spans where span_id in (select unnest($1))",
                    [sorted(s.span_ids(request))])
    assert found == [(2,)]


def test_partial_success_names_the_rejected_spans_and_stores_the_rest(collector: s.CollectorProcess) -> None:
    request = s.simple_request(5, seed=777)
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].trace_id = b"short"
    spans[1].span_id = b"\x00" * 8
    status, _, body = send(collector, request.SerializeToString())
    assert status == 200
    response = ExportTraceServiceResponse.FromString(body)
    assert response.partial_success.rejected_spans == 2
    assert "trace_id must be 16 bytes" in response.partial_success.error_message
    stored = s.query(collector.store, "select count(*) from spans where span_id in (select unnest($1))",
                     [sorted(s.span_ids(request))])
    assert stored == [(3,)]
    # the same in JSON: counts are int64, so strings
    document = s.to_otlp_json(s.simple_request(2, seed=778))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "zz"
    status, _, body = s.post(collector.http, "/v1/traces", orjson.dumps(document), s.json_headers(TOKEN))
    assert status == 200
    assert orjson.loads(body)["partialSuccess"]["rejectedSpans"] == "1"


def test_every_member_of_a_multi_member_gzip_body_is_stored(collector: s.CollectorProcess) -> None:
    first, second = s.simple_request(2, seed=4301), s.simple_request(3, seed=4302)
    body = gzip.compress(first.SerializeToString()) + gzip.compress(second.SerializeToString())
    status, _, _ = send(collector, body, **{"Content-Encoding": "gzip"})
    assert status == 200
    assert stored(collector, s.span_ids(first) | s.span_ids(second)) == 5


@pytest.mark.parametrize("trailer", [b"garbage", b"\x1f\x8b", b"\x00" * 8])
def test_bytes_after_the_gzip_data_are_refused_and_nothing_is_stored(
    collector: s.CollectorProcess, trailer: bytes
) -> None:
    request = s.simple_request(2, seed=4400 + len(trailer))
    status, _, response = send(
        collector, gzip.compress(request.SerializeToString()) + trailer, **{"Content-Encoding": "gzip"}
    )
    assert status == 400, response
    assert "gzip" in status_pb2.Status.FromString(response).message
    assert stored(collector, s.span_ids(request)) == 0
    still_serving(collector)


def gzip_bomb(decompressed_bytes: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1024 * 1024)
    parts = [packer.compress(zeros) for _ in range(decompressed_bytes // len(zeros))]
    return b"".join(parts) + packer.flush()


BAD_INPUTS = [
    ("garbage protobuf", "POST", "/v1/traces", s.protobuf_headers(TOKEN), b"\xff\xfe garbage", 400),
    ("malformed JSON", "POST", "/v1/traces", s.json_headers(TOKEN), b'{"resourceSpans": [', 400),
    ("JSON of the wrong shape", "POST", "/v1/traces", s.json_headers(TOKEN), b'{"resourceSpans": 5}', 400),
    ("JSON span name of the wrong type", "POST", "/v1/traces", s.json_headers(TOKEN),
     s.SPEC_EXAMPLE_JSON.replace(b'"I\'m a server span"', b"5"), 400),
    ("JSON flags past 64 bits", "POST", "/v1/traces", s.json_headers(TOKEN),
     s.SPEC_EXAMPLE_JSON.replace(b'"kind": 2', b'"kind": 2, "flags": 18446744073709551616'), 400),
    ("gzip header, plain body", "POST", "/v1/traces",
     s.protobuf_headers(TOKEN, **{"Content-Encoding": "gzip"}), b"plain", 400),
    ("truncated gzip", "POST", "/v1/traces", s.protobuf_headers(TOKEN, **{"Content-Encoding": "gzip"}),
     gzip.compress(b"x" * 1000)[:-20], 400),
    ("other media type", "POST", "/v1/traces",
     {"Content-Type": "text/plain", "Authorization": f"Bearer {TOKEN}"}, b"hello", 415),
    ("other encoding", "POST", "/v1/traces",
     s.protobuf_headers(TOKEN, **{"Content-Encoding": "br"}), b"x", 415),
    ("GET", "GET", "/v1/traces", {"Authorization": f"Bearer {TOKEN}"}, b"", 405),
    ("PUT", "PUT", "/v1/traces", s.protobuf_headers(TOKEN), b"", 405),
    ("unknown path", "POST", "/v2/traces", s.protobuf_headers(TOKEN), b"", 404),
    ("no token", "POST", "/v1/traces", s.protobuf_headers(), b"", 401),
    ("wrong token", "POST", "/v1/traces", s.protobuf_headers("guess"), b"", 401),
    ("non-ASCII token", "POST", "/v1/traces", s.protobuf_headers("tökén"), b"", 401),
    ("too large", "POST", "/v1/traces", s.protobuf_headers(TOKEN), b"\x0a" * (LIMIT + 1), 413),
]


@pytest.mark.parametrize(("what", "method", "path", "headers", "body", "expected"), BAD_INPUTS,
                         ids=[case[0] for case in BAD_INPUTS])
def test_bad_input_gets_its_status_and_the_collector_keeps_serving(
    collector: s.CollectorProcess, what: str, method: str, path: str, headers: dict[str, str], body: bytes,
    expected: int,
) -> None:
    status, response_headers, response = s.post(collector.http, path, body, headers, method=method)
    assert status == expected, (what, response)
    if expected in (400, 401, 413) and "json" not in headers.get("Content-Type", ""):
        assert status_pb2.Status.FromString(response).message  # a google.rpc.Status says why
    if expected == 400 and "json" in headers.get("Content-Type", ""):
        assert orjson.loads(response)["code"] == 3  # INVALID_ARGUMENT
    if expected == 405:
        assert response_headers["allow"] == "POST"
    if expected == 401:
        assert response_headers["www-authenticate"].startswith("Bearer")
    still_serving(collector)


def test_a_gzip_bomb_is_refused_without_inflating_it(collector: s.CollectorProcess) -> None:
    bomb = gzip_bomb(512 * 1024 * 1024)  # 512 MiB of zeros in about 0.5 MB
    rss_before = psutil.Process(collector.proc.pid).memory_info().rss
    status, _, response = send(collector, bomb, **{"Content-Encoding": "gzip"})
    assert status == 413
    assert "after decompression" in status_pb2.Status.FromString(response).message
    assert psutil.Process(collector.proc.pid).memory_info().rss - rss_before < 64 * 1024 * 1024
    still_serving(collector)


def test_logs_and_metrics_are_answered_with_everything_rejected(collector: s.CollectorProcess) -> None:
    logs = ExportLogsServiceRequest()
    scope_logs = logs.resource_logs.add().scope_logs.add()
    for i in range(3):
        scope_logs.log_records.add(time_unix_nano=i + 1)
    status, _, body = s.post(collector.http, "/v1/logs", logs.SerializeToString(), s.protobuf_headers(TOKEN))
    assert status == 200
    answer = ExportLogsServiceResponse.FromString(body)
    assert answer.partial_success.rejected_log_records == 3
    assert "traces only" in answer.partial_success.error_message
    metrics = {"resourceMetrics": [{"scopeMetrics": [{"metrics": [
        {"name": "m", "gauge": {"dataPoints": [{"asInt": "1"}, {"asInt": "2"}]}}]}]}]}
    status, _, body = s.post(collector.http, "/v1/metrics", orjson.dumps(metrics), s.json_headers(TOKEN))
    assert status == 200
    assert orjson.loads(body)["partialSuccess"]["rejectedDataPoints"] == "2"


def hold_a_request_open(collector: s.CollectorProcess, body: bytes) -> socket.socket:
    """Sends all of a request but its last byte, so the bytes it sent stay held (and reserved)."""
    host, port = collector.http.split(":")
    sock = socket.create_connection((host, int(port)))
    head = (
        f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body[:-1])
    return sock


def test_past_the_in_flight_budget_it_answers_429_with_retry_after(collector: s.CollectorProcess) -> None:
    held_request = s.simple_request(3000, seed=31337).SerializeToString()
    assert INFLIGHT < len(held_request) < LIMIT
    sock = hold_a_request_open(collector, held_request)
    try:
        # no probe while the held body streams in: a probe holding bytes at the moment the held request's
        # next chunk would pass the budget gets that request refused instead (the budget is shared)
        time.sleep(0.5)
        deadline = time.monotonic() + READ_TIMEOUT_S - 1
        seed = 31338
        while True:  # until the collector has read the held request's headers and reserved its bytes
            seed += 1
            status, headers, _ = send(collector, s.simple_request(1, seed=seed).SerializeToString())
            if status != 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert status == 429
        assert int(headers["retry-after"]) >= 1
        sock.sendall(held_request[-1:])
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    finally:
        sock.close()
    still_serving(collector)


def test_chunked_bodies_and_keep_alive_connections_work(collector: s.CollectorProcess) -> None:
    import http.client

    host, port = collector.http.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        for seed in (501, 502):
            request = s.simple_request(4, seed=seed).SerializeToString()
            connection.request(
                "POST", "/v1/traces", body=iter([request[:10], request[10:]]),
                headers=s.protobuf_headers(TOKEN), encode_chunked=True,
            )
            response = connection.getresponse()
            response.read()
            assert response.status == 200
    finally:
        connection.close()


def test_the_store_directory_has_the_catalog_analysts_open(collector: s.CollectorProcess) -> None:
    assert (Path(collector.store) / "turnlens.duckdb").is_file()
    views = {row[0] for row in s.query(collector.store, "select view_name from duckdb_views()")}
    assert {"spans", "span_events", "span_links", "resources"} <= views


def test_a_refused_request_leaves_its_keep_alive_connection_usable(collector: s.CollectorProcess) -> None:
    import http.client

    host, port = collector.http.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    body = s.simple_request(5, seed=8080).SerializeToString()
    try:
        for headers, expected in [
            (s.protobuf_headers("wrong"), 401),
            ({"Content-Type": "text/plain", "Authorization": f"Bearer {TOKEN}"}, 415),
            (s.protobuf_headers(TOKEN), 200),
        ]:
            connection.request("POST", "/v1/traces", body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            assert response.status == expected
    finally:
        connection.close()


def test_a_token_no_header_can_carry_stops_start_up_with_a_clear_message(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [*s.TURNLENS, "collect", "--store", str(tmp_path / "store"), "--http", f"127.0.0.1:{s.free_port()}",
         "--grpc", "off", "--token", "sécret"],
        capture_output=True, text=True, timeout=30, cwd=s.REPO,
    )
    assert done.returncode == 2
    assert "--token must be visible ASCII" in done.stderr


@pytest.mark.slow
def test_distinct_large_attribute_values_do_not_pile_up_in_memory(collector: s.CollectorProcess) -> None:
    """Each request a new 256 KiB resource attribute: nothing of it may stay once the request is answered."""

    def send_large(i: int) -> None:
        request = s.simple_request(1, seed=600_000 + i)
        value = f"{i:08d}" + "x" * (256 * 1024)
        request.resource_spans[0].resource.attributes.append(s.kv("big.value", value))
        status, _, body = send(collector, request.SerializeToString())
        assert status == 200, body

    process = psutil.Process(collector.proc.pid)
    for i in range(20):  # allocator warm-up
        send_large(i)
    before = process.memory_info().rss
    for i in range(20, 160):
        send_large(i)
    grown = process.memory_info().rss - before
    assert grown < 32 * 1024 * 1024, f"RSS grew by {grown / 2**20:.0f} MiB over 140 requests of 256 KiB"


def test_slow_connections_announcing_large_bodies_do_not_starve_other_clients(
    collector: s.CollectorProcess,
) -> None:
    """The budget holds the bytes a request has sent, not the ones its Content-Length announces."""
    import grpc

    host, port = collector.http.split(":")
    slow = []
    for _ in range(2):
        sock = socket.create_connection((host, int(port)))
        sock.sendall(
            f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Length: {LIMIT}\r\n\r\n\x0a".encode()
        )
        slow.append(sock)
    try:
        time.sleep(0.5)  # the collector has read the headers and the byte
        request = s.simple_request(2, seed=9900)
        status, _, body = send(collector, request.SerializeToString())
        assert status == 200, body
        with grpc.insecure_channel(collector.grpc) as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            export(s.simple_request(2, seed=9901).SerializeToString(),
                   metadata=[("authorization", f"Bearer {TOKEN}")], timeout=10)
    finally:
        for sock in slow:
            sock.close()


def test_a_body_slower_than_the_read_timeout_gets_408_and_the_connection_closes(
    collector: s.CollectorProcess,
) -> None:
    host, port = collector.http.split(":")
    sock = socket.create_connection((host, int(port)), timeout=READ_TIMEOUT_S + 10)
    started = time.monotonic()
    try:
        sock.sendall(
            f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Length: 1000\r\n\r\n".encode()
        )
        for _ in range(int(READ_TIMEOUT_S * 4)):  # a byte every 0.25 s: each read gets something
            sock.sendall(b"\x0a")
            time.sleep(0.25)
        answer = b""
        while chunk := sock.recv(65536):  # until the collector closes the connection
            answer += chunk
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
    assert b"did not arrive within" in answer
    assert time.monotonic() - started < READ_TIMEOUT_S + 5
    still_serving(collector)


def test_clients_trickling_their_headers_get_408_while_an_exporter_is_served(
    collector: s.CollectorProcess,
) -> None:
    """Slowloris: clients sending their headers a byte at a time, and one sending nothing, are cut off at
    the header timeout instead of holding a thread each at will; an exporter is served meanwhile."""
    import threading

    from opentelemetry.sdk.trace.export import SpanExportResult

    host, port = collector.http.split(":")
    slow = [socket.create_connection((host, int(port)), timeout=30) for _ in range(40)]
    silent = socket.create_connection((host, int(port)), timeout=30)
    answers: dict[int, bytes] = {}
    started = time.monotonic()

    def trickle() -> None:
        head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 200
        for k in range(len(head)):
            for sock in slow:
                if sock.fileno() >= 0:
                    try:
                        sock.send(head[k : k + 1])
                    except OSError:  # the collector closed it
                        continue
            time.sleep(0.1)

    def read(index: int, sock: socket.socket) -> None:
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except OSError:
            pass
        answers[index] = answer

    readers = [threading.Thread(target=read, args=(i, sock)) for i, sock in enumerate([*slow, silent])]
    for thread in [threading.Thread(target=trickle, daemon=True), *readers]:
        thread.start()
    provider = TracerProvider(resource=Resource.create({"service.name": "sdk-beside-slowloris"}))
    exporter = OTLPSpanExporter(
        endpoint=f"http://{collector.http}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5
    )
    spans = []
    try:
        while time.monotonic() - started < HEADER_TIMEOUT_S + 1:  # all through the slow clients' attempt
            with provider.get_tracer("tests.slowloris").start_as_current_span("served") as span:
                spans.append(span)
            assert exporter.export([spans[-1]]) == SpanExportResult.SUCCESS
            time.sleep(0.2)
        for thread in readers:
            thread.join(max(0.0, started + HEADER_TIMEOUT_S + 5 - time.monotonic()))
        cut_off_after = time.monotonic() - started
    finally:
        for sock in [*slow, silent]:
            sock.close()
    assert len(answers) == len(slow) + 1, "some slow clients were still connected"
    assert cut_off_after < HEADER_TIMEOUT_S + 5
    for index in range(len(slow)):
        assert answers[index].startswith(b"HTTP/1.1 408"), answers[index][:100]
        assert b"headers did not arrive within" in answers[index]
    assert answers[len(slow)] == b""  # sent nothing: closed without an answer
    assert len(spans) >= 3
    sql = "select count(*) from spans where service_name = 'sdk-beside-slowloris'"
    assert s.query(collector.store, sql)[0][0] == len(spans)


def exchange(collector: s.CollectorProcess, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Sends raw bytes as one request; (status, headers, body) of the answer."""
    import http.client

    host, port = collector.http.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def raw_request(*headers: str, body: bytes = b"") -> bytes:
    lines = ["POST /v1/traces HTTP/1.1", "Host: x", "Content-Type: application/x-protobuf",
             f"Authorization: Bearer {TOKEN}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


CHUNKED = "Transfer-Encoding: chunked"
FRAMING = [
    ("unknown method", b"BREW /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    ("Content-Length with an underscore", raw_request("Content-Length: 1_0", body=b"\x0a" * 10), 400),
    ("Content-Length with a sign", raw_request("Content-Length: +10", body=b"\x0a" * 10), 400),
    ("two different Content-Lengths", raw_request("Content-Length: 2", "Content-Length: 3", body=b"\x0a\x00"),
     400),
    ("a negative chunk size", raw_request(CHUNKED, body=b"-5\r\nabcde\r\n0\r\n\r\n"), 400),
    ("a 0x chunk size", raw_request(CHUNKED, body=b"0x2\r\n\x0a\x00\r\n0\r\n\r\n"), 400),
    ("a chunk without its CRLF", raw_request(CHUNKED, body=b"2\r\n\x0a\x00XX0\r\n\r\n"), 400),
    ("an unknown transfer coding", raw_request("Transfer-Encoding: gzip, chunked", body=b"0\r\n\r\n"), 501),
    ("chunked and a Content-Length", raw_request(CHUNKED, "Content-Length: 5", body=b"0\r\n\r\n"), 400),
    ("too many headers", raw_request(*[f"X-{i}: y" for i in range(150)], "Content-Length: 0"), 431),
    ("HTTP/0.9", raw_request("Content-Length: 0").replace(b"HTTP/1.1", b"HTTP/0.9", 1), 505),
    ("HTTP/2.0 on HTTP/1", raw_request("Content-Length: 0").replace(b"HTTP/1.1", b"HTTP/2.0", 1), 505),
    ("a request line of noise", b"\x8fC\xde\xf4\xe7A\x97U?\r\n\r\n", 400),
]


@pytest.mark.parametrize(("what", "raw", "expected"), FRAMING, ids=[case[0] for case in FRAMING])
def test_malformed_framing_is_refused_with_a_status_body(
    collector: s.CollectorProcess, what: str, raw: bytes, expected: int
) -> None:
    status, headers, body = exchange(collector, raw)
    assert status == expected, (what, body[:200])
    assert headers["content-type"] in ("application/x-protobuf", "application/json"), body[:200]
    assert b"<html" not in body.lower()
    if expected == 405:
        assert headers["allow"] == "POST"
    still_serving(collector)


def test_spans_on_thousands_of_start_days_make_one_partition(collector: s.CollectorProcess) -> None:
    """Partitions are days of receipt: a sender's clock cannot make a request write a file per day."""
    request = s.simple_request(2000, seed=12_000)
    for day, span in enumerate(request.resource_spans[0].scope_spans[0].spans):
        span.start_time_unix_nano = day * 86_400 * 10**9 + 1
        span.end_time_unix_nano = span.start_time_unix_nano + 1000
    partitions_before = set((Path(collector.store) / "segments").glob("date=*"))
    started = time.monotonic()
    status, _, body = send(collector, request.SerializeToString())
    assert status == 200, body
    assert time.monotonic() - started < 5
    created = set((Path(collector.store) / "segments").glob("date=*")) - partitions_before
    assert len(created) <= 1  # today's, unless an earlier test made it already
    assert stored(collector, s.span_ids(request)) == 2000
