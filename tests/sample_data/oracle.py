"""The detector table applied in plain Python to the spans the simulator emitted, so the tests
can check the labels against the data itself rather than against the scenarios' intentions."""

from __future__ import annotations

import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from turnlens.kernel import contract as c

SIDE_EFFECTING = ("button_reversible", "soft_irreversible", "hard_irreversible")
REGISTRY = Path(__file__).resolve().parents[2] / "sample_data" / "tool_registry.toml"


@dataclass
class Event:
    hlc: int
    wall: int
    name: str
    layer: str | None
    attrs: dict[str, Any]


@dataclass
class Call:
    call_id: str
    name: str | None = None
    tier: str | None = None
    key: str | None = None
    billable: bool = False
    needs_approval: bool = False
    phases: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    acks: list[tuple[int, bool]] = field(default_factory=list)
    tool_span_end_wall: int | None = None
    tool_layer_acked_cancel: bool = False

    def first(self, phase: str) -> int | None:
        return min(self.phases[phase], default=None)


def turn_of_spans(spans: Iterable[ReadableSpan]) -> dict[int, tuple[str, str]]:
    """trace id -> (session, turn), through the spans' own identity or their links."""
    identity: dict[int, tuple[str, str]] = {}
    spans = list(spans)
    for span in spans:
        attrs = span.attributes or {}
        if c.TURN_ID in attrs:
            identity[span.context.trace_id] = (str(attrs[c.SESSION_ID]), str(attrs[c.TURN_ID]))
    for span in spans:
        if span.context.trace_id not in identity:
            for link in span.links:
                if link.context.trace_id in identity:
                    identity[span.context.trace_id] = identity[link.context.trace_id]
    return identity


def findings(spans: list[ReadableSpan]) -> Counter[tuple[str, str, str, str | None]]:
    """(kind, session_id, turn_id, tool_call_id) of every finding the table says the data contains."""
    registry = tomllib.loads(REGISTRY.read_text())["tools"]
    identity = turn_of_spans(spans)
    events: dict[tuple[str, str], list[Event]] = defaultdict(list)
    calls: dict[tuple[str, str], dict[str, Call]] = defaultdict(dict)
    charges: list[tuple[tuple[str, str], str, str | None]] = []
    for span in spans:
        turn = identity.get(span.context.trace_id)
        attrs = span.attributes or {}
        if turn is None:
            continue
        layer = attrs.get(c.LAYER)
        if attrs.get(c.GEN_AI_OPERATION_NAME) == "execute_tool" and c.TOOL_CALL_ID in attrs:
            call = calls[turn].setdefault(str(attrs[c.TOOL_CALL_ID]), Call(str(attrs[c.TOOL_CALL_ID])))
            call.tool_span_end_wall = span.end_time
        for ev in span.events:
            e_attrs = dict(ev.attributes or {})
            if c.HLC not in e_attrs:
                continue
            event = Event(int(e_attrs[c.HLC]), ev.timestamp, ev.name, str(layer) if layer else None, e_attrs)
            events[turn].append(event)
            call_id = e_attrs.get(c.TOOL_CALL_ID)
            if ev.name == c.EV_BILLING_CHARGED and e_attrs.get(c.BILLING_KIND) == "side_effect":
                charges.append((turn, str(call_id), e_attrs.get(c.IDEMPOTENCY_KEY)))
                continue
            if call_id is None:
                if ev.name == c.EV_CANCEL_ACKNOWLEDGED and layer == "tool" and c.TOOL_CALL_ID in attrs:
                    calls[turn][str(attrs[c.TOOL_CALL_ID])].tool_layer_acked_cancel = True
                continue
            call = calls[turn].setdefault(str(call_id), Call(str(call_id)))
            if c.TOOL_NAME in e_attrs:
                call.name = str(e_attrs[c.TOOL_NAME])
                call.tier = e_attrs.get(c.TOOL_TIER) or registry.get(call.name, {}).get("tier")
                call.key = e_attrs.get(c.IDEMPOTENCY_KEY)
                call.billable = bool(e_attrs.get(c.TOOL_BILLABLE))
                call.needs_approval = (
                    bool(e_attrs.get(c.TOOL_REQUIRES_APPROVAL)) or call.tier == "hard_irreversible"
                )
            if ev.name == c.EV_THIRD_PARTY_ACK:
                call.acks.append((event.hlc, bool(e_attrs.get(c.THIRD_PARTY_REPLAYED))))
            else:
                call.phases[ev.name].append(event.hlc)

    found: Counter[tuple[str, str, str, str | None]] = Counter()
    committed_refs = {
        ref
        for turn_calls in calls.values()
        for call in turn_calls.values()
        if call.first(c.EV_TOOL_COMMITTED) is not None
        for ref in (call.call_id, call.key)
        if ref
    }
    charged_refs = {ref for _, call_id, key in charges for ref in (call_id, key) if ref}
    for turn, evs in events.items():
        session, turn_id = turn
        evs.sort(key=lambda e: (e.hlc, e.wall))
        if any(latest_before - e.wall > 1_000_000 for e, latest_before in _with_latest_before(evs)):
            found[("causal_inversion", session, turn_id, None)] += 1
        requested = [e for e in evs if e.name == c.EV_CANCEL_REQUESTED]
        cancel = requested[0] if requested else None
        completed = [e.hlc for e in evs if e.name == c.EV_STREAM_COMPLETED]
        for call in calls[turn].values():
            committed = call.first(c.EV_TOOL_COMMITTED)
            dispatched = call.first(c.EV_TOOL_DISPATCHED)
            side_effecting = call.tier in SIDE_EFFECTING
            if (
                cancel
                and side_effecting
                and committed is not None
                and (
                    committed > cancel.hlc
                    or (not call.phases[c.EV_TOOL_COMPENSATED] and not call.phases[c.EV_TRANSCRIPT_RECEIPT])
                )
            ):
                found[("cancelled_but_committed", session, turn_id, call.call_id)] += 1
            if (
                call.tier in ("soft_irreversible", "hard_irreversible")
                and dispatched is not None
                and (not completed or dispatched < min(completed))
            ):
                found[("eager_side_effect", session, turn_id, call.call_id)] += 1
            if call.name is not None and call.tier is None:
                found[("untiered_tool", session, turn_id, call.call_id)] += 1
            if side_effecting and committed is not None and call.key is None:
                found[("missing_idempotency_key", session, turn_id, call.call_id)] += 1
            granted = call.first(c.EV_APPROVAL_GRANTED)
            if call.needs_approval and committed is not None and (granted is None or granted > committed):
                found[("unapproved_side_effect", session, turn_id, call.call_id)] += 1
            if (
                call.billable
                and committed is not None
                and not call.phases[c.EV_TOOL_COMPENSATED]
                and call.call_id not in charged_refs
                and call.key not in charged_refs
            ):
                found[("unbilled_side_effect", session, turn_id, call.call_id)] += 1
            if (
                call.acks
                and committed is None
                and (
                    call.phases[c.EV_TOOL_FAILED]
                    or call.phases[c.EV_TOOL_DISCARDED]
                    or call.tool_layer_acked_cancel
                )
            ):
                found[("ghost_commit", session, turn_id, call.call_id)] += 1
        for charge_turn, call_id, key in charges:
            if charge_turn == turn and call_id not in committed_refs and key not in committed_refs:
                found[("billed_not_committed", session, turn_id, call_id)] += 1
        if cancel is not None:
            reached = {e.layer for e in evs if e.name.startswith("cancel.")}
            acked = {e.layer for e in evs if e.name == c.EV_CANCEL_ACKNOWLEDGED}
            running = any(
                call.first(c.EV_TOOL_DISPATCHED) is not None
                and call.first(c.EV_TOOL_DISPATCHED) < cancel.hlc
                and not any(
                    h < cancel.hlc
                    for phase in (c.EV_TOOL_COMMITTED, c.EV_TOOL_FAILED, c.EV_TOOL_DISCARDED)
                    for h in call.phases[phase]
                )
                and (call.tool_span_end_wall is None or call.tool_span_end_wall > cancel.wall)
                for call in calls[turn].values()
            )
            if "runtime" not in reached or (running and "tool" not in reached) or not acked:
                found[("cancel_not_propagated", session, turn_id, None)] += 1
            progress = [
                int(e.attrs[c.STREAM_TOKENS])
                for e in evs
                if e.name == c.EV_STREAM_PROGRESS and e.hlc <= cancel.hlc
            ]
            billed = sum(
                int(e.attrs.get(c.BILLING_TOKENS, 0))
                for e in evs
                if e.name == c.EV_BILLING_CHARGED and e.attrs.get(c.BILLING_KIND) == "tokens"
            )
            if any(e.name == c.EV_STREAM_PROGRESS for e in evs) and billed > max(progress, default=0):
                found[("tokens_billed_after_cancel", session, turn_id, None)] += 1
    found.update(_interrupted_framework_calls(spans, identity, registry))
    by_key_acks: Counter[str] = Counter()
    by_key_comp: Counter[str] = Counter()
    where: dict[str, tuple[str, str, str]] = {}
    for turn, turn_calls in calls.items():
        for call in turn_calls.values():
            if call.key:
                by_key_acks[call.key] += sum(1 for _, replayed in call.acks if not replayed)
                by_key_comp[call.key] += len(call.phases[c.EV_TOOL_COMPENSATED])
                where[call.key] = (turn[0], turn[1], call.call_id)
    for key, count in by_key_acks.items():
        if count > 1:
            found[("duplicate_commit", *where[key])] += 1
    for key, count in by_key_comp.items():
        if count > 1:
            found[("duplicate_compensation", *where[key])] += 1
    return found


def _with_latest_before(evs: list[Event]) -> Iterable[tuple[Event, int]]:
    latest = -1
    for event in evs:
        yield event, latest
        latest = max(latest, event.wall)


def _interrupted_framework_calls(
    spans: list[ReadableSpan], identity: dict[int, tuple[str, str]], registry: dict[str, Any]
) -> Iterable[tuple[str, str, str, str | None]]:
    """interrupted_side_effect: in a framework's turn (a trace without the contract's identity, its session
    the GenAI conversation id), a side-effecting tool's span that ended by a CancelledError."""
    sessions = {
        span.context.trace_id: str((span.attributes or {})[c.GEN_AI_CONVERSATION_ID])
        for span in spans
        if c.GEN_AI_CONVERSATION_ID in (span.attributes or {})
    }
    for span in spans:
        attrs = span.attributes or {}
        trace = span.context.trace_id
        if trace in identity or trace not in sessions or attrs.get(c.GEN_AI_OPERATION_NAME) != "execute_tool":
            continue
        tier = registry.get(str(attrs.get(c.TOOL_NAME)), {}).get("tier")
        cancelled = any(
            e.name == "exception" and "CancelledError" in str((e.attributes or {}).get("exception.type"))
            for e in span.events
        )
        if cancelled and tier in SIDE_EFFECTING:
            call_id = str(attrs[c.TOOL_CALL_ID])
            yield ("interrupted_side_effect", sessions[trace], format(trace, "032x"), call_id)
