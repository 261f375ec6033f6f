"""A small store written by hand for the dashboard tests: real Parquet segments of SEGMENT_SCHEMA rows
and the real catalog, holding one turn whose email was committed after the user pressed stop and one
clean turn. Used where the simulator's sample is not available.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storebuilder import StoreBuilder
from turnlens.kernel import contract as c

T0_MS = 1_795_000_000_000  # 2026-11-18
CANCELLED = ("sess-incident", "turn-stop")
CLEAN = ("sess-clean", "turn-ok")


class _Turns:
    """The scenario's spans with times in ms after each turn's start (`offset` ms after T0)."""

    def __init__(self, store: Path) -> None:
        self.builder = StoreBuilder(store)

    def span(
        self,
        session: str,
        turn: str,
        layer: str,
        name: str,
        start: int,
        end: int | None,
        *,
        node: str,
        skew: int = 0,
        events: list[tuple[str, int, dict[str, Any]]] = (),
        attrs: dict[str, Any] | None = None,
        offset: int = 0,
    ) -> None:
        """The node's wall clock lags its HLC by `skew` ms."""
        base = T0_MS + offset
        self.builder.span(
            session, turn, layer, name, base + start, None if end is None else base + end,
            node=node, skew_ms=skew, attributes=attrs, scope="tests.dashboard",
            events=[(ev, base + at, ev_attrs) for ev, at, ev_attrs in events],
        )


def _invoice_call(call: str) -> dict[str, Any]:
    return {
        c.TOOL_NAME: "send_invoice",
        c.TOOL_CALL_ID: call,
        c.IDEMPOTENCY_KEY: f"key-{call}",
        c.TOOL_TIER: "hard_irreversible",
        c.TOOL_DISPATCH: "eager",
        c.TOOL_BILLABLE: True,
        c.TOOL_REQUIRES_APPROVAL: True,
    }


def _search_call(call: str) -> dict[str, Any]:
    return {
        c.TOOL_NAME: "search_docs",
        c.TOOL_CALL_ID: call,
        c.TOOL_TIER: "read_only",
        c.TOOL_DISPATCH: "eager",
        c.TOOL_BILLABLE: False,
        c.TOOL_REQUIRES_APPROVAL: False,
    }


def build_store(store: Path) -> Path:
    """Writes the two turns and the catalog under `store`; returns the store folder."""
    b = _Turns(store)
    s, t = CANCELLED
    call = _invoice_call("call-invoice-1")
    b.span(
        s,
        t,
        "http",
        "POST /chat",
        0,
        1500,
        node="http-1",
        events=[
            (c.EV_USER_INPUT, 0, {c.INPUT_KIND: "message"}),
            (c.EV_CANCEL_REQUESTED, 800, {c.CANCEL_ORIGIN: "user_clicked"}),
            (c.EV_CANCEL_RECEIVED, 802, {}),
            (c.EV_CANCEL_ACKNOWLEDGED, 806, {}),
        ],
    )
    b.span(
        s,
        t,
        "stream",
        "stream",
        10,
        830,
        node="stream-1",
        skew=30,
        events=[
            (c.EV_STREAM_PROGRESS, 200, {c.STREAM_TOKENS: 40}),
            (c.EV_STREAM_PROGRESS, 400, {c.STREAM_TOKENS: 120}),
            (c.EV_CANCEL_RECEIVED, 812, {}),
            (c.EV_CANCEL_ACKNOWLEDGED, 820, {}),
            (c.EV_STREAM_COMPLETED, 825, {c.FINISH_REASONS: ["cancelled"]}),
        ],
    )
    b.span(
        s,
        t,
        "runtime",
        "agent loop",
        20,
        1250,
        node="runtime-1",
        events=[
            (c.EV_TOOL_DISPATCHED, 500, call),
            (c.EV_CANCEL_RECEIVED, 815, {}),
            (c.EV_CANCEL_ACKNOWLEDGED, 1240, {}),
        ],
    )
    b.span(
        s,
        t,
        "tool",
        "execute_tool send_invoice",
        505,
        1100,
        node="tool-1",
        attrs=call,
        events=[(c.EV_TOOL_PREPARED, 520, call), (c.EV_TOOL_COMMITTED, 950, call)],
    )
    b.span(
        s,
        t,
        "third_party",
        "POST relay /send",
        900,
        960,
        node="relay-1",
        skew=-60,
        attrs=call,
        events=[
            (
                c.EV_THIRD_PARTY_ACK,
                955,
                {**call, c.THIRD_PARTY_STATUS: "250 OK", c.THIRD_PARTY_REPLAYED: False},
            )
        ],
    )
    b.span(
        s,
        t,
        "billing",
        "charge",
        1000,
        1010,
        node="billing-1",
        events=[
            (c.EV_BILLING_CHARGED, 1005, {**call, c.BILLING_KIND: "side_effect", c.BILLING_AMOUNT: 0.5}),
            (c.EV_BILLING_CHARGED, 1006, {c.BILLING_KIND: "tokens", c.BILLING_TOKENS: 300}),
        ],
    )

    s, t = CLEAN
    call = _search_call("call-search-1")
    offset = 60_000
    b.span(
        s,
        t,
        "http",
        "POST /chat",
        0,
        900,
        node="http-1",
        offset=offset,
        events=[(c.EV_USER_INPUT, 0, {c.INPUT_KIND: "message"})],
    )
    b.span(
        s,
        t,
        "stream",
        "stream",
        10,
        880,
        node="stream-1",
        skew=30,
        offset=offset,
        events=[
            (c.EV_STREAM_PROGRESS, 300, {c.STREAM_TOKENS: 80}),
            (c.EV_STREAM_COMPLETED, 870, {c.FINISH_REASONS: ["stop"]}),
        ],
    )
    b.span(
        s,
        t,
        "runtime",
        "agent loop",
        20,
        890,
        node="runtime-1",
        offset=offset,
        events=[(c.EV_TOOL_DISPATCHED, 100, call)],
    )
    b.span(
        s,
        t,
        "tool",
        "execute_tool search_docs",
        105,
        250,
        node="tool-1",
        offset=offset,
        attrs=call,
        events=[(c.EV_TOOL_PREPARED, 110, call), (c.EV_TOOL_COMMITTED, 240, call)],
    )

    return b.builder.write()
