"""The instrumentation side of the span contract: HLC propagation across processes, a span processor
that stamps `turnlens.hlc`, and one helper per contract event, so an agent team adopts the conventions
in a few lines instead of retyping attribute names.

The HLC travels in W3C baggage under the key `turnlens.hlc` next to the W3C trace context; `inject`
applies the clock's send rule and `extract` its receive rule. Every event helper stamps the event with
its own HLC and takes the event's timestamp from the same wall-clock reading.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson
from opentelemetry import baggage
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import Span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from turnlens.kernel import contract as c
from turnlens.kernel.hlc import HybridLogicalClock

log = logging.getLogger(__name__)

HLC_BAGGAGE_KEY = c.HLC  # the baggage entry that carries the sender's HLC
PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])

_default_clock = HybridLogicalClock()


def default_clock() -> HybridLogicalClock:
    """The process-wide clock the helpers use when none is passed."""
    return _default_clock


def set_default_clock(clock: HybridLogicalClock) -> None:
    """Replaces the process-wide clock (tests and simulators inject their own wall clock this way)."""
    global _default_clock
    _default_clock = clock


# --- propagation ----------------------------------------------------------------------------------


def inject(
    carrier: MutableMapping[str, str],
    *,
    context: Context | None = None,
    clock: HybridLogicalClock | None = None,
) -> int:
    """Writes trace context and the sender's HLC (send rule) into `carrier`; returns that HLC."""
    stamp = (clock or _default_clock).now()
    PROPAGATOR.inject(carrier, context=baggage.set_baggage(HLC_BAGGAGE_KEY, str(stamp), context))
    return stamp


@dataclass(frozen=True)
class Received:
    """What `extract` read from a carrier: the remote context to parent spans on, and the HLCs."""

    context: Context
    remote_hlc: int | None  # the sender's HLC, None when the carrier had none
    hlc: int | None  # this clock's HLC for the receive event, None when nothing was received


def extract(carrier: Mapping[str, str], *, clock: HybridLogicalClock | None = None) -> Received:
    """Reads trace context and the sender's HLC from `carrier` and applies the receive rule.

    Header names are matched case-insensitively, as HTTP requires (clients send `Traceparent`).
    Raises ClockOffsetError when the sender's clock is further ahead than the clock's max offset.
    """
    context = PROPAGATOR.extract({key.lower(): value for key, value in carrier.items()})
    raw = baggage.get_baggage(HLC_BAGGAGE_KEY, context)
    try:
        remote = int(str(raw)) if raw is not None else None
    except ValueError:
        log.warning("ignoring malformed %s baggage entry %r", HLC_BAGGAGE_KEY, raw)
        remote = None
    if remote is None or remote < 0:
        return Received(context, None, None)
    return Received(context, remote, (clock or _default_clock).update(remote))


class HLCSpanProcessor(SpanProcessor):
    """Stamps `turnlens.hlc` (the clock's local-event rule) on every span as it starts."""

    def __init__(self, clock: HybridLogicalClock | None = None) -> None:
        self.clock = clock

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        span.set_attribute(c.HLC, (self.clock or _default_clock).now())

    def on_end(self, span: ReadableSpan) -> None:
        return None

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


# --- tool calls -----------------------------------------------------------------------------------


def idempotency_key(tool_name: str, arguments: Mapping[str, Any], user: str, turn_nonce: str) -> str:
    """The key the span contract prescribes, made at prepare time: tool name, parsed arguments, user and a
    per-turn nonce, so a retry inside the turn de-duplicates and a deliberate re-issue does not."""
    payload = orjson.dumps([tool_name, arguments, user, turn_nonce], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(payload).hexdigest()[:32]


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the contract describes it; `attributes()` goes on its spans and events."""

    name: str
    call_id: str
    tier: str | None = None  # None: the tool was registered without a tier
    dispatch: str = "eager"
    idempotency_key: str | None = None
    billable: bool = False
    requires_approval: bool | None = None  # None: derived, hard-irreversible tools always require it

    def attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            c.TOOL_NAME: self.name,
            c.TOOL_CALL_ID: self.call_id,
            c.TOOL_DISPATCH: self.dispatch,
            c.TOOL_BILLABLE: self.billable,
            c.TOOL_REQUIRES_APPROVAL: self.needs_approval,
        }
        if self.tier is not None:
            attrs[c.TOOL_TIER] = self.tier
        if self.idempotency_key is not None:
            attrs[c.IDEMPOTENCY_KEY] = self.idempotency_key
        return attrs

    @property
    def needs_approval(self) -> bool:
        if self.requires_approval is not None:
            return self.requires_approval
        return self.tier == "hard_irreversible"

    def reference(self) -> dict[str, Any]:
        """The attributes by which a third-party span or a billing event names this call."""
        ref: dict[str, Any] = {c.TOOL_CALL_ID: self.call_id}
        if self.idempotency_key is not None:
            ref[c.IDEMPOTENCY_KEY] = self.idempotency_key
        return ref


# --- events ---------------------------------------------------------------------------------------


def emit(
    span: Span,
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    clock: HybridLogicalClock | None = None,
) -> int:
    """Adds the contract event `name` to `span`, stamped with its own HLC; returns that HLC."""
    stamp, wall_ns = (clock or _default_clock).now_with_wall()
    span.add_event(name, {**(attributes or {}), c.HLC: stamp}, timestamp=wall_ns)
    return stamp


def user_input(span: Span, *, kind: str = "message", clock: HybridLogicalClock | None = None) -> int:
    return emit(span, c.EV_USER_INPUT, {c.INPUT_KIND: kind}, clock=clock)


def stream_progress(span: Span, tokens: int, *, clock: HybridLogicalClock | None = None) -> int:
    return emit(span, c.EV_STREAM_PROGRESS, {c.STREAM_TOKENS: tokens}, clock=clock)


def stream_completed(span: Span, finish_reason: str, *, clock: HybridLogicalClock | None = None) -> int:
    return emit(span, c.EV_STREAM_COMPLETED, {c.FINISH_REASONS: [finish_reason]}, clock=clock)


def cancel_requested(span: Span, *, origin: str, clock: HybridLogicalClock | None = None) -> int:
    return emit(span, c.EV_CANCEL_REQUESTED, {c.CANCEL_ORIGIN: origin}, clock=clock)


def cancel_received(span: Span, *, clock: HybridLogicalClock | None = None) -> int:
    return emit(span, c.EV_CANCEL_RECEIVED, clock=clock)


def cancel_acknowledged(span: Span, *, clock: HybridLogicalClock | None = None) -> int:
    return emit(span, c.EV_CANCEL_ACKNOWLEDGED, clock=clock)


def tool_event(span: Span, name: str, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    """Any tool lifecycle event (`tool.buffered` … `partial.stored`) with the call's attributes."""
    return emit(span, name, call.attributes(), clock=clock)


def tool_buffered(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return tool_event(span, c.EV_TOOL_BUFFERED, call, clock=clock)


def tool_dispatched(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return tool_event(span, c.EV_TOOL_DISPATCHED, call, clock=clock)


def tool_prepared(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return tool_event(span, c.EV_TOOL_PREPARED, call, clock=clock)


def tool_committed(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return tool_event(span, c.EV_TOOL_COMMITTED, call, clock=clock)


def tool_compensated(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return tool_event(span, c.EV_TOOL_COMPENSATED, call, clock=clock)


def tool_compensation_failed(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return tool_event(span, c.EV_TOOL_COMPENSATION_FAILED, call, clock=clock)


def tool_discarded(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return tool_event(span, c.EV_TOOL_DISCARDED, call, clock=clock)


def tool_failed(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return tool_event(span, c.EV_TOOL_FAILED, call, clock=clock)


def partial_stored(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return tool_event(span, c.EV_PARTIAL_STORED, call, clock=clock)


def third_party_ack(
    span: Span,
    call: ToolCall,
    *,
    status: str,
    replayed: bool = False,
    clock: HybridLogicalClock | None = None,
) -> int:
    attrs = {**call.reference(), c.THIRD_PARTY_STATUS: status, c.THIRD_PARTY_REPLAYED: replayed}
    return emit(span, c.EV_THIRD_PARTY_ACK, attrs, clock=clock)


def approval_requested(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return emit(span, c.EV_APPROVAL_REQUESTED, call.reference(), clock=clock)


def approval_granted(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return emit(span, c.EV_APPROVAL_GRANTED, call.reference(), clock=clock)


def approval_denied(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    return emit(span, c.EV_APPROVAL_DENIED, call.reference(), clock=clock)


def tokens_charged(
    span: Span, *, tokens: int, amount: float, clock: HybridLogicalClock | None = None
) -> int:
    """`billing.charged` for the tokens of a turn."""
    attrs = {c.BILLING_KIND: "tokens", c.BILLING_TOKENS: tokens, c.BILLING_AMOUNT: amount}
    return emit(span, c.EV_BILLING_CHARGED, attrs, clock=clock)


def side_effect_charged(
    span: Span, call: ToolCall, *, amount: float, clock: HybridLogicalClock | None = None
) -> int:
    """`billing.charged` for a side effect, naming the call it bills."""
    attrs = {**call.reference(), c.BILLING_KIND: "side_effect", c.BILLING_AMOUNT: amount}
    return emit(span, c.EV_BILLING_CHARGED, attrs, clock=clock)


def transcript_receipt(span: Span, call: ToolCall, *, clock: HybridLogicalClock | None = None) -> int:
    """`transcript.receipt`: the user was shown that the call's side effect happened."""
    return emit(span, c.EV_TRANSCRIPT_RECEIPT, call.reference(), clock=clock)
