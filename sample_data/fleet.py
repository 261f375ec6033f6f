"""A simulated agent fleet: one service per layer, each a real OpenTelemetry TracerProvider with its own
resource, wall-clock offset and HLC, driven by a discrete-event scheduler so that time is simulated and
thousands of sessions generate in seconds.

Messages between services carry trace context and the HLC through the project's own propagation
helpers, so the receive rule applies exactly as it would between instrumented production processes.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, set_span_in_context
from turnlens.instrument import tracing as instrument
from turnlens.kernel import contract as c
from turnlens.kernel.hlc import HybridLogicalClock

MS = 1_000_000
# A long stream flushes a `stream.progress` every 150 ms: more than the SDK's default 128 events a span
# (OTEL_SPAN_EVENT_COUNT_LIMIT), which a real streamer would raise just the same.
SPAN_LIMITS = SpanLimits(max_events=4096)


class Scheduler:
    """Runs callbacks in simulated time order; equal times run in the order they were scheduled."""

    def __init__(self, start_ns: int) -> None:
        self.now_ns = start_ns
        self._queue: list[tuple[int, int, Callable[[], object]]] = []
        self._seq = 0

    def at(self, when_ns: int, action: Callable[[], object]) -> None:
        if when_ns < self.now_ns:
            raise ValueError(f"cannot schedule {self.now_ns - when_ns} ns in the past")
        heapq.heappush(self._queue, (when_ns, self._seq, action))
        self._seq += 1

    def run_until(self, until_ns: int | None = None) -> None:
        """Runs every action due up to `until_ns` (all of them when None)."""
        queue = self._queue
        while queue and (until_ns is None or queue[0][0] <= until_ns):
            self.now_ns, _, action = heapq.heappop(queue)
            action()
        if until_ns is not None and until_ns > self.now_ns:
            self.now_ns = until_ns

    def __len__(self) -> int:
        return len(self._queue)


class SeededIdGenerator(IdGenerator):
    """Trace and span ids from a seeded generator, so one seed always gives the same spans."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


class SpanSink(SpanProcessor):
    """Collects finished spans of every service in the order they end, for the driver to drain."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)

    def drain(self) -> list[ReadableSpan]:
        spans, self.spans = self.spans, []
        return spans


class RecordingClock(HybridLogicalClock):
    """An HLC that can log every stamp it issues, so tests can check causality message by message."""

    def __init__(self, node: str, wall_clock_ns: Callable[[], int], log: list[Any] | None) -> None:
        super().__init__(wall_clock_ns)
        self.node = node
        self.log = log

    def now_with_wall(self) -> tuple[int, int]:
        stamp, wall = super().now_with_wall()
        if self.log is not None:
            self.log.append((self.node, "local", stamp, None))
        return stamp, wall

    def update(self, remote: int) -> int:
        stamp = super().update(remote)
        if self.log is not None:
            self.log.append((self.node, "receive", stamp, remote))
        return stamp


@dataclass(frozen=True)
class NodeSpec:
    """One service instance of the fleet."""

    service: str
    instance: str
    layer: str | None  # None: a framework-instrumented app that does not speak the turnlens contract
    offset_ms: float = 0.0  # its wall clock minus true time
    hlc: bool = True  # whether it runs the turnlens HLC at all


# Clocks in one data centre disciplined by PTP: offset 0 here, because the contract's causal_inversion
# detector has a 1 ms resolution and any fleet-wide offset would make every cross-node turn a finding.
# Scenarios that want a bad clock route to an instance that has one (ticketing-2, 250 ms behind).
DEFAULT_NODES: tuple[NodeSpec, ...] = (
    NodeSpec("gateway", "gateway-1", "http"),
    NodeSpec("gateway", "gateway-ws-1", "http"),  # the WebSocket control channel: typing, cancels
    NodeSpec("streamer", "streamer-1", "stream"),
    NodeSpec("agent-runtime", "agent-runtime-1", "runtime"),
    NodeSpec("tool-executor", "tool-executor-1", "tool"),
    NodeSpec("email-relay", "email-relay-1", "third_party"),
    NodeSpec("payments", "payments-1", "third_party"),
    NodeSpec("ticketing", "ticketing-1", "third_party"),
    NodeSpec("ticketing", "ticketing-2", "third_party", offset_ms=-250.0),
    NodeSpec("deploy", "deploy-1", "third_party"),
    NodeSpec("sms", "sms-gateway-1", "third_party"),
    NodeSpec("billing", "billing-1", "billing"),
    NodeSpec("support-bot", "support-bot-1", None, hlc=False),  # OpenTelemetry GenAI conventions only
    NodeSpec("research-assistant", "research-assistant-1", None, hlc=False),  # OpenInference only
)


class Node:
    """One service instance: a TracerProvider with its resource, its wall clock and its HLC."""

    def __init__(self, spec: NodeSpec, fleet: Fleet) -> None:
        self.spec = spec
        self.fleet = fleet
        self.offset_ns = int(spec.offset_ms * MS)
        self.clock = RecordingClock(spec.instance, self.wall_ns, fleet.causality_log)
        resource = Resource.create({c.SERVICE_NAME: spec.service, c.SERVICE_INSTANCE_ID: spec.instance})
        self.provider = TracerProvider(
            resource=resource, id_generator=fleet.id_generator, span_limits=SPAN_LIMITS
        )
        if spec.hlc:
            self.provider.add_span_processor(instrument.HLCSpanProcessor(self.clock))
        self.provider.add_span_processor(fleet.sink)
        self.tracer = self.provider.get_tracer("turnlens.sample_data", "0.1.0")

    @property
    def name(self) -> str:
        return self.spec.instance

    def wall_ns(self) -> int:
        """This node's wall clock: simulated true time plus its offset."""
        return self.fleet.scheduler.now_ns + self.offset_ns

    def start_span(
        self,
        name: str,
        *,
        context: Context | None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[Link] | None = None,
    ) -> Span:
        return self.tracer.start_span(
            name,
            context=context if context is not None else Context(),
            kind=kind,
            attributes=attributes,
            links=links,
            start_time=self.wall_ns(),
        )

    def end_span(self, span: Span, *, error: str | None = None) -> None:
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=self.wall_ns())

    def send(self, span: Span | None) -> dict[str, str]:
        """The headers of a message this node sends from inside `span` (the HLC send rule applies)."""
        carrier: dict[str, str] = {}
        context = set_span_in_context(span) if span is not None else None
        if self.spec.hlc:
            instrument.inject(carrier, context=context, clock=self.clock)
        else:
            instrument.PROPAGATOR.inject(carrier, context=context)
        return carrier

    def receive(self, carrier: Mapping[str, str]) -> Context:
        """Takes a message in: returns the remote context and applies the HLC receive rule."""
        if self.spec.hlc:
            return instrument.extract(carrier, clock=self.clock).context
        return instrument.PROPAGATOR.extract(carrier)


@dataclass
class Fleet:
    """All the nodes, one scheduler, one id generator and one sink: the world a simulation runs in."""

    start_ns: int
    seed: int
    nodes_spec: tuple[NodeSpec, ...] = DEFAULT_NODES
    record_causality: bool = False
    scheduler: Scheduler = field(init=False)
    sink: SpanSink = field(init=False)
    id_generator: SeededIdGenerator = field(init=False)
    causality_log: list[Any] | None = field(init=False)
    nodes: dict[str, Node] = field(init=False)

    def __post_init__(self) -> None:
        self.scheduler = Scheduler(self.start_ns)
        self.sink = SpanSink()
        self.id_generator = SeededIdGenerator(random.Random(f"ids-{self.seed}"))
        self.causality_log = [] if self.record_causality else None
        self.nodes = {spec.instance: Node(spec, self) for spec in self.nodes_spec}

    def node(self, instance: str) -> Node:
        return self.nodes[instance]
