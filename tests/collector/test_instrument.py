"""HLC propagation across a process boundary, the span processor and the event helpers, on the real SDK."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, get_current_span
from turnlens.instrument import tracing as instrument
from turnlens.kernel import contract as c
from turnlens.kernel.contract import unpack_hlc
from turnlens.kernel.hlc import ClockOffsetError, HybridLogicalClock

MS = 1_000_000


class ManualWall:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms * MS


def make_service(name: str, clock: HybridLogicalClock) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({c.SERVICE_NAME: name}))
    provider.add_span_processor(instrument.HLCSpanProcessor(clock))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_inject_then_extract_in_a_second_clock_applies_the_receive_rule() -> None:
    sender = HybridLogicalClock(ManualWall(5_000))
    receiver = HybridLogicalClock(ManualWall(4_900))  # 100 ms behind the sender
    provider, _ = make_service("gateway", sender)
    with provider.get_tracer("t").start_as_current_span("POST /chat") as span:
        carrier: dict[str, str] = {}
        sent = instrument.inject(carrier, clock=sender)
    assert "traceparent" in carrier and f"{c.HLC}={sent}" in carrier["baggage"]

    received = instrument.extract(carrier, clock=receiver)
    assert received.remote_hlc == sent
    assert received.hlc is not None and received.hlc > sent
    assert unpack_hlc(receiver.now())[0] == 5_000  # the receiver now runs on the sender's time
    remote_parent = get_current_span(received.context).get_span_context()
    assert remote_parent.trace_id == span.get_span_context().trace_id


def test_extract_rejects_a_sender_beyond_the_max_offset() -> None:
    sender = HybridLogicalClock(ManualWall(10_000))
    receiver = HybridLogicalClock(ManualWall(9_000), max_offset_ms=500)
    carrier: dict[str, str] = {}
    instrument.inject(carrier, clock=sender)
    with pytest.raises(ClockOffsetError):
        instrument.extract(carrier, clock=receiver)


def test_a_carrier_without_hlc_leaves_the_clock_alone() -> None:
    receiver = HybridLogicalClock(ManualWall(1))
    before = receiver.peek()
    received = instrument.extract({"baggage": f"{c.HLC}=not-a-number"}, clock=receiver)
    assert received.hlc is None and receiver.peek() == before


@pytest.fixture
def receiving_service() -> Iterator[tuple[str, HybridLogicalClock, InMemorySpanExporter]]:
    """A real HTTP service on 127.0.0.1 whose handler extracts the HLC and starts a server span."""
    clock = HybridLogicalClock(ManualWall(20_000))  # 50 ms behind the client below
    provider, exporter = make_service("streamer", clock)
    tracer = provider.get_tracer("t")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            received = instrument.extract(dict(self.headers.items()), clock=clock)
            with tracer.start_as_current_span("stream", context=received.context, kind=SpanKind.SERVER):
                pass
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", clock, exporter
    server.shutdown()
    server.server_close()


def test_propagation_over_a_real_http_hop_keeps_causal_order(
    receiving_service: tuple[str, HybridLogicalClock, InMemorySpanExporter],
) -> None:
    url, _, server_spans = receiving_service
    client_clock = HybridLogicalClock(ManualWall(20_050))
    provider, client_spans = make_service("gateway", client_clock)
    with provider.get_tracer("t").start_as_current_span("POST /chat", kind=SpanKind.CLIENT):
        headers: dict[str, str] = {}
        instrument.inject(headers, clock=client_clock)
        urllib.request.urlopen(urllib.request.Request(url, data=b"{}", headers=headers), timeout=5)
    (client_span,) = client_spans.get_finished_spans()
    (server_span,) = server_spans.get_finished_spans()
    assert server_span.parent is not None and server_span.parent.span_id == client_span.context.span_id
    assert server_span.attributes[c.HLC] > client_span.attributes[c.HLC]
    assert unpack_hlc(server_span.attributes[c.HLC])[0] == 20_050  # not the server's own 20_000


def test_span_processor_and_helpers_stamp_every_event_with_its_own_increasing_hlc() -> None:
    wall = ManualWall(3_000)
    clock = HybridLogicalClock(wall)
    provider, exporter = make_service("tool-executor", clock)
    call = instrument.ToolCall(
        "send_email", "call_1", tier="soft_irreversible", dispatch="speculative",
        idempotency_key=instrument.idempotency_key("send_email", {"to": "a@b"}, "u1", "n1"), billable=True,
    )
    span = provider.get_tracer("t").start_span("execute_tool send_email", attributes=call.attributes())
    instrument.tool_prepared(span, call, clock=clock)
    wall.ms += 40
    instrument.tool_committed(span, call, clock=clock)
    instrument.cancel_requested(span, origin="user_clicked", clock=clock)
    span.end()
    (finished,) = exporter.get_finished_spans()
    stamps = [finished.attributes[c.HLC]] + [e.attributes[c.HLC] for e in finished.events]
    assert stamps == sorted(stamps) and len(set(stamps)) == 4
    prepared, committed, cancel = finished.events
    assert committed.name == c.EV_TOOL_COMMITTED
    assert committed.attributes[c.IDEMPOTENCY_KEY] == call.idempotency_key
    assert committed.attributes[c.TOOL_TIER] == "soft_irreversible"
    assert committed.timestamp == 3_040 * MS  # the event time is the reading its HLC came from
    assert unpack_hlc(committed.attributes[c.HLC]) == (3_040, 0)
    assert cancel.attributes[c.CANCEL_ORIGIN] == "user_clicked"


def test_idempotency_key_is_stable_for_a_retry_and_new_for_another_turn() -> None:
    key = instrument.idempotency_key("create_ticket", {"title": "x", "prio": 2}, "u", "turn-1")
    assert key == instrument.idempotency_key("create_ticket", {"prio": 2, "title": "x"}, "u", "turn-1")
    assert key != instrument.idempotency_key("create_ticket", {"title": "x", "prio": 2}, "u", "turn-2")


def test_hard_irreversible_tools_require_approval_unless_told() -> None:
    deploy = instrument.ToolCall("kick_off_deploy", "c", tier="hard_irreversible")
    assert deploy.attributes()[c.TOOL_REQUIRES_APPROVAL] is True
    untiered = instrument.ToolCall("update_crm_record", "c")
    assert c.TOOL_TIER not in untiered.attributes()


def test_default_clock_is_used_when_none_is_passed() -> None:
    previous = instrument.default_clock()
    clock = HybridLogicalClock(ManualWall(8_000))
    instrument.set_default_clock(clock)
    try:
        provider, exporter = make_service("x", clock)
        span = provider.get_tracer("t").start_span("stream")
        stamp = instrument.stream_progress(span, 120)
        span.end()
        assert unpack_hlc(stamp)[0] == 8_000
        assert exporter.get_finished_spans()[0].events[0].attributes[c.STREAM_TOKENS] == 120
    finally:
        instrument.set_default_clock(previous)
