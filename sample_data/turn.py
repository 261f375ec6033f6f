"""The building blocks every scenario is written with: a turn's timeline on the simulated fleet, its
spans and contract events scheduled at explicit times, the messages that carry the HLC between
services, and the ground-truth labels the turn should produce.

A scenario computes its whole timeline when the turn starts (times in ms from the turn's start) and
schedules it; the fleet's scheduler then plays every turn of every session in one global time order,
so each node's wall clock and HLC only ever move forward.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Link, Span, SpanKind, set_span_in_context
from turnlens.instrument import tracing as instrument
from turnlens.instrument.tracing import ToolCall
from turnlens.kernel import contract as c
from turnlens.sample_data.fleet import MS, Fleet, Node

HTTP = "gateway-1"
WS = "gateway-ws-1"
STREAMER = "streamer-1"
RUNTIME = "agent-runtime-1"
TOOLS = "tool-executor-1"
BILLING = "billing-1"

TOKEN_PRICE = 0.00002  # per generated token, in the billing events' currency


@dataclass(frozen=True)
class Label:
    """One finding the detectors should report, in the detectors' terms."""

    kind: str
    session_id: str
    turn_id: str
    tool_call_id: str | None
    idempotency_key: str | None
    scenario: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "tool_call_id": self.tool_call_id,
            "idempotency_key": self.idempotency_key,
            "scenario": self.scenario,
        }


@dataclass
class Session:
    """A conversation: its id, its user and the turns played so far."""

    session_id: str
    user: str
    turns: int = 0


def lognormal(
    rng: random.Random, median: float, sigma: float, low: float = 0.0, high: float = math.inf
) -> float:
    """A log-normal draw with the given median, clipped to [low, high]: how latencies are shaped."""
    return min(high, max(low, rng.lognormvariate(math.log(median), sigma)))


@dataclass
class Stream:
    """A token stream: `total` tokens from `start` at `rate` tokens/s, flushed (`stream.progress`) every
    150 ms — inside the 200 ms segment-gap budget, so a clean stream breaches nothing."""

    start: float
    total: int
    rate: float
    points: list[tuple[float, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        step = 150.0
        t = self.start + step
        while t < self.end:
            self.points.append((t, self.tokens_at(t)))
            t += step
        self.points.append((self.end, self.total))

    @property
    def end(self) -> float:
        return self.start + self.total / self.rate * 1000

    def tokens_at(self, t: float) -> int:
        return max(0, min(self.total, int((t - self.start) * self.rate / 1000)))

    def time_of(self, tokens: int) -> float:
        return self.start + tokens / self.rate * 1000

    def streamed_before(self, t: float) -> int:
        """What the stream layer reported (`stream.progress`) before time t."""
        return max((tokens for when, tokens in self.points if when < t), default=0)


class Turn:
    """One turn being built: schedules spans, events and messages; keeps its labels."""

    def __init__(
        self,
        fleet: Fleet,
        rng: random.Random,
        session: Session,
        scenario: str,
        start_ns: int,
        hop_extra: Callable[[int], float],
        hop_ms: float = 3.0,
    ) -> None:
        self.fleet = fleet
        self.rng = rng
        self.session = session
        self.scenario = scenario
        self.t0 = start_ns
        self.turn_id = f"turn-{rng.getrandbits(48):012x}"
        self.nonce = f"{rng.getrandbits(32):08x}"
        self.labels: list[Label] = []
        self.cancelled = False
        self.contract = True  # False for turns emitted the way frameworks do (no turnlens.*, no HLC)
        self.end_ms = 0.0
        self._hop_extra = hop_extra  # injected delay (ms) on cancel hops at a given time: the chaos window
        self._hop_ms = hop_ms  # median of one network hop
        self._spans: dict[str, tuple[Node, Span]] = {}
        self._opened: list[str] = []
        self._planned: dict[str, str] = {}  # span key -> node, known when the timeline is built
        self._closed: set[str] = set()
        self.trace_id_hex: str | None = None

    # --- time -------------------------------------------------------------------------------------

    def at(self, t: float, action: Callable[[], object]) -> None:
        """Schedules `action` at t ms after the turn's start."""
        self.end_ms = max(self.end_ms, t)
        self.fleet.scheduler.at(self.t0 + int(t * MS), action)

    def hop(self) -> float:
        """One network hop inside the data centre (log-normal around the configured median)."""
        return lognormal(
            self.rng, self._hop_ms, 0.5, max(0.1, self._hop_ms / 10), max(5.0, self._hop_ms * 25)
        )

    def cancel_hop(self, t: float) -> float:
        """One hop of the cancel signal; slowed inside the chaos window."""
        return self.hop() + self._hop_extra(self.t0 + int(t * MS))

    # --- spans and events --------------------------------------------------------------------------

    def open(
        self,
        t: float,
        key: str,
        node_name: str,
        name: str,
        *,
        parent: str | None = None,
        sent_at: float | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: dict[str, Any] | None = None,
        link_to: str | None = None,
        identity: bool = True,
    ) -> None:
        """Starts span `key` on a node at t. A parent on another node is reached by a message sent at
        `sent_at` (default: one hop earlier); `identity=False` leaves session and turn off the span, so
        it belongs to the turn only through `link_to` (another trace linked to the turn)."""
        node = self.fleet.node(node_name)
        attrs: dict[str, Any] = {}
        if self.contract and node.spec.layer:
            if identity:
                attrs[c.SESSION_ID] = self.session.session_id
                attrs[c.TURN_ID] = self.turn_id
            attrs[c.LAYER] = node.spec.layer
        attrs.update(attributes or {})
        self._opened.append(key)
        carrier: dict[str, dict[str, str]] = {}
        remote = parent is not None and self._planned[parent] != node_name
        self._planned[key] = node_name
        if parent is not None and remote:
            send_t = sent_at if sent_at is not None else max(0.0, t - self.hop())
            if send_t >= t:
                raise ValueError(
                    f"{self.scenario}: span {key} starts at {t} before its request leaves at {send_t}"
                )
            self.at(send_t, lambda: carrier.update(h=self._node(parent).send(self._span(parent))))

        def start() -> None:
            if "h" in carrier:
                context = node.receive(carrier["h"])
            elif parent is not None:
                context = set_span_in_context(self._span(parent))
            else:
                context = None
            links = [Link(self._span(link_to).get_span_context())] if link_to else None
            span = node.start_span(name, context=context, kind=kind, attributes=attrs, links=links)
            self._spans[key] = (node, span)
            if parent is None and self.trace_id_hex is None:
                self.trace_id_hex = format(span.get_span_context().trace_id, "032x")

        self.at(t, start)

    def close(self, t: float, key: str, *, error: str | None = None) -> None:
        self._closed.add(key)
        self.at(t, lambda: self._node(key).end_span(self._span(key), error=error))

    def exception(self, t: float, key: str, exception_type: str) -> None:
        """Records an exception event on span `key` at t, as the SDK's `record_exception` does (a framework's
        turn: no HLC)."""
        self.at(
            t,
            lambda: self._span(key).add_event(
                "exception", {"exception.type": exception_type}, timestamp=self._node(key).wall_ns()
            ),
        )

    def event(self, t: float, key: str, helper: Callable[..., int], *args: Any, **kwargs: Any) -> None:
        """Emits a contract event through an `instrument` helper on span `key` at t, with that node's HLC."""
        self.at(t, lambda: helper(self._span(key), *args, clock=self._node(key).clock, **kwargs))

    def signal(
        self, t_send: float, src: str, t_recv: float, dst: str, then: Callable[[], None] | None = None
    ) -> None:
        """A message from span `src`'s node to span `dst`'s node: HLC send rule at t_send, receive rule at
        t_recv, then `then()` on arrival."""
        if t_recv <= t_send:
            raise ValueError(
                f"{self.scenario}: message {src}->{dst} arrives at {t_recv} before it leaves at {t_send}"
            )
        carrier: dict[str, dict[str, str]] = {}
        self.at(t_send, lambda: carrier.update(h=self._node(src).send(self._span(src))))

        def arrive() -> None:
            self._node(dst).receive(carrier["h"])
            if then is not None:
                then()

        self.at(t_recv, arrive)

    def finish(self, t: float | None = None) -> float:
        """Ends every span still open, innermost first, after everything scheduled; returns the end."""
        end = max(self.end_ms, t or 0.0) + 1.0
        for key in reversed(self._opened):
            if key not in self._closed:
                self.close(end, key)
                end += 0.2
        self.at(end, self._spans.clear)  # nothing refers to the ended spans any more: a live run stays small
        return end

    def _node(self, key: str) -> Node:
        return self._spans[key][0]

    def _span(self, key: str) -> Span:
        return self._spans[key][1]

    # --- tool calls and labels --------------------------------------------------------------------

    def call_id(self) -> str:
        return f"call_{self.rng.getrandbits(64):016x}"

    def label(self, kind: str, call: ToolCall | None = None) -> None:
        self.labels.append(
            Label(
                kind,
                self.session.session_id,
                self.turn_id,
                call.call_id if call else None,
                call.idempotency_key if call else None,
                self.scenario,
            )
        )

    def key_for(self, tool: str, arguments: dict[str, Any]) -> str:
        return instrument.idempotency_key(tool, arguments, self.session.user, self.nonce)
