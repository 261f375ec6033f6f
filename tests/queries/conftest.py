"""Given-rows fixtures for the view tests: spans written as real Parquet segments, then a real catalog.

`kit.span(...)` builds one row of SEGMENT_SCHEMA with times in milliseconds after T0, `kit.event(...)`
one span event; `kit.store(rows)` writes them the way the collector lays a store out and returns a
read-only connection to the catalog that write_catalog built over them.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest
import storebuilder
from stagedstore import StagedStore
from storebuilder import write_store
from turnlens.kernel import contract as c
from turnlens.queries import catalog

T0_MS = 1_795_000_000_000  # 2026-11-18, a whole second: every test time is an offset from it
_ids = itertools.count(1)


def ns(ms: float) -> int:
    return int(round((T0_MS + ms) * 1_000_000))


def hlc(ms: float, logical: int = 0) -> int:
    return c.pack_hlc(T0_MS + int(ms), logical)


def event(name: str, at: float, *, hlc_at: float | tuple[float, int] | None = None, **attrs: Any) -> dict:
    """A span event at `at` ms; `hlc_at` is the HLC's physical ms (or (ms, logical)); None: no HLC."""
    packed = None
    if hlc_at is not None:
        packed = hlc(*hlc_at) if isinstance(hlc_at, tuple) else hlc(hlc_at)
    return storebuilder.event_row(name, ns(at), attrs, packed)


def span(
    name: str,
    start: float,
    end: float | None,
    *,
    trace: str = "t1",
    span_id: str | None = None,
    parent: str | None = None,
    layer: str | None = None,
    node: str = "node-a",
    service: str | None = None,
    session: str | None = "s1",
    turn: str | None = "turn1",
    hlc_at: float | tuple[float, int] | None = None,
    events: list[dict] | None = None,
    links: list[tuple[str, str]] | None = None,
    kind: str = "internal",
    status: str = "unset",
    attrs: dict[str, Any] | None = None,
    received: int = 0,
) -> dict:
    """One stored span. Ids are short names made into hex so tests read; `trace` names the trace."""
    attributes = dict(attrs or {})
    if session is not None:
        attributes[c.SESSION_ID] = session
    if turn is not None:
        attributes[c.TURN_ID] = turn
    if layer is not None:
        attributes[c.LAYER] = layer
    packed = None
    if hlc_at is not None:
        packed = hlc(*hlc_at) if isinstance(hlc_at, tuple) else hlc(hlc_at)
        attributes[c.HLC] = packed
    return storebuilder.span_row(
        trace_id=trace_hex(trace),
        span_id=span_hex(span_id or f"sp{next(_ids)}"),
        parent_span_id=span_hex(parent) if parent else None,
        name=name,
        kind=kind,
        start_ns=ns(start),
        end_ns=ns(end) if end is not None else None,
        attributes=attributes,
        events=events or [],
        links=[(trace_hex(t), span_hex(s)) for t, s in (links or [])],
        status=status,
        node=node,
        service=service or node,
        session=attributes.get(c.SESSION_ID, attributes.get(c.GEN_AI_CONVERSATION_ID)),
        turn=attributes.get(c.TURN_ID),
        layer=c.infer_layer(kind, attributes),
        hlc=packed,
        received_ns=ns(start) + received,
    )


def trace_hex(name: str) -> str:
    """A test's short trace name as a 32-hex-digit trace id (a digest: prefixes never collide)."""
    return hashlib.md5(name.encode()).hexdigest()


def span_hex(name: str) -> str:
    """A test's short span name as a 16-hex-digit span id."""
    return hashlib.md5(name.encode()).hexdigest()[:16]


@pytest.fixture(scope="session")
def builders() -> SimpleNamespace:
    """The row builders alone, for module-scoped stores that hold many scenarios."""
    return SimpleNamespace(
        span=span, event=event, turn=contract_turn, hlc=hlc, ns=ns, write_store=write_store
    )


@pytest.fixture
def staged(tmp_path: Path, builders: SimpleNamespace) -> StagedStore:
    """An empty store fed in stages (tests/support/stagedstore.py): the partitioned derived state's tests."""
    return StagedStore(tmp_path / "store", builders)


@pytest.fixture(name="contract_turn")
def contract_turn_fixture() -> Any:
    """contract_turn for the tests that take their builders as fixtures (beside `staged`)."""
    return contract_turn


@pytest.fixture(name="span")
def span_fixture() -> Any:
    """span for the tests that take their builders as fixtures (beside `staged`)."""
    return span


@pytest.fixture
def kit(tmp_path: Path) -> Iterator[SimpleNamespace]:
    """The builders plus `store(rows, registry_toml=..., settings_toml=...)`: a read-only connection."""
    connections: list[duckdb.DuckDBPyConnection] = []
    stores = itertools.count()

    def store(rows: list[dict], **files: str) -> duckdb.DuckDBPyConnection:
        directory = write_store(tmp_path / f"store{next(stores)}", rows, **files)
        con = catalog.connect(directory)
        connections.append(con)
        return con

    def rows_of(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> list[dict]:
        cursor = con.execute(sql, params) if params is not None else con.execute(sql)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    yield SimpleNamespace(
        span=span,
        event=event,
        store=store,
        rows=rows_of,
        hlc=hlc,
        ns=ns,
        T0_MS=T0_MS,
        trace_hex=trace_hex,
        span_hex=span_hex,
        contract=c,
        turn=contract_turn,
    )
    for con in connections:
        con.close()


CALL_ID = "call1"
TOOL = "send_invoice"


def contract_turn(
    *,
    session: str = "s1",
    turn: str = "turn1",
    trace: str = "t1",
    tool: str = TOOL,
    tier: str | None = "soft_irreversible",
    dispatch: str = "speculative",
    key: str | None = "k1",
    billable: bool = True,
    requires_approval: bool = True,
    dispatch_at: float = 2100,
    outcome: str = "committed",
    commit_at: float = 2200,
    approved_at: float | None = 2080,
    acks: tuple[tuple[str, bool], ...] = (("250 OK", False),),
    charged: bool = True,
    compensations: int = 0,
    receipt_at: float | None = None,
    cancel_at: float | None = None,
    cancel_origin: str = "user_clicked",
    reached: tuple[str, ...] = ("stream", "runtime", "tool"),
    acked: tuple[str, ...] = ("http", "stream", "runtime", "tool"),
    tokens_billed: int = 50,
) -> list[dict]:
    """One turn of the contract as its remedies want it: by default it completes with one
    speculative, approved, keyed, charged invoice and no finding at all. Each argument breaks one
    remedy. Every node's clock agrees, so HLC physical time equals wall time."""
    call = {
        c.TOOL_NAME: tool,
        c.TOOL_CALL_ID: CALL_ID,
        c.TOOL_DISPATCH: dispatch,
        c.TOOL_BILLABLE: billable,
        c.TOOL_REQUIRES_APPROVAL: requires_approval,
    }
    if tier is not None:
        call[c.TOOL_TIER] = tier
    if key is not None:
        call[c.IDEMPOTENCY_KEY] = key
    ref = {c.TOOL_CALL_ID: CALL_ID, **({c.IDEMPOTENCY_KEY: key} if key else {})}
    ids = {"session": session, "turn": turn, "trace": trace}
    stream_end = 2000 if cancel_at is None else cancel_at + 30
    finish = "stop" if cancel_at is None else "cancelled"

    http_events = [event(c.EV_USER_INPUT, 1, hlc_at=1, **{c.INPUT_KIND: "message"})]
    stream_events = [
        event(c.EV_STREAM_PROGRESS, 100, hlc_at=100, **{c.STREAM_TOKENS: 10}),
        event(c.EV_STREAM_PROGRESS, 300, hlc_at=300, **{c.STREAM_TOKENS: 50}),
        event(c.EV_STREAM_COMPLETED, stream_end, hlc_at=stream_end, **{c.FINISH_REASONS: [finish]}),
    ]
    runtime_events = [event(c.EV_TOOL_BUFFERED, 400, hlc_at=400, **call)]
    tool_events = []
    if cancel_at is not None:
        http_events.append(
            event(c.EV_CANCEL_REQUESTED, cancel_at, hlc_at=cancel_at, **{c.CANCEL_ORIGIN: cancel_origin})
        )
        per_layer = {
            "http": http_events,
            "stream": stream_events,
            "runtime": runtime_events,
            "tool": tool_events,
        }
        for i, layer in enumerate(reached):
            per_layer[layer].append(event(c.EV_CANCEL_RECEIVED, cancel_at + 5 + i, hlc_at=cancel_at + 5 + i))
        for i, layer in enumerate(acked):
            extra = call if layer == "tool" else {}
            per_layer[layer].append(
                event(c.EV_CANCEL_ACKNOWLEDGED, cancel_at + 20 + i, hlc_at=cancel_at + 20 + i, **extra)
            )
    if approved_at is not None:
        runtime_events.append(
            event(c.EV_APPROVAL_REQUESTED, approved_at - 30, hlc_at=approved_at - 30, **call)
        )
        runtime_events.append(event(c.EV_APPROVAL_GRANTED, approved_at, hlc_at=approved_at, **call))
    if dispatch_at is not None:
        runtime_events.append(event(c.EV_TOOL_DISPATCHED, dispatch_at, hlc_at=dispatch_at, **call))
        tool_events.append(event(c.EV_TOOL_PREPARED, dispatch_at + 20, hlc_at=dispatch_at + 20, **call))
        outcome_step = {"committed": c.EV_TOOL_COMMITTED, "failed": c.EV_TOOL_FAILED}[outcome]
        tool_events.append(event(outcome_step, commit_at, hlc_at=commit_at, **call))
        for i in range(compensations):
            tool_events.append(
                event(c.EV_TOOL_COMPENSATED, commit_at + 100 + i, hlc_at=commit_at + 100 + i, **call)
            )
    elif cancel_at is not None:
        runtime_events.append(event(c.EV_TOOL_DISCARDED, cancel_at + 25, hlc_at=cancel_at + 25, **call))
    if receipt_at is not None:
        http_events.append(event(c.EV_TRANSCRIPT_RECEIPT, receipt_at, hlc_at=receipt_at, **ref))

    rows = [
        span(
            "POST /chat",
            0,
            3000,
            span_id="http",
            layer="http",
            node="gw",
            hlc_at=0,
            kind="server",
            events=http_events,
            **ids,
        ),
        span(
            "stream",
            5,
            stream_end + 10,
            span_id="stream",
            parent="http",
            layer="stream",
            node="streamer",
            hlc_at=5,
            events=stream_events,
            **ids,
        ),
        span(
            "invoke_agent",
            10,
            2950,
            span_id="agent",
            parent="http",
            layer="runtime",
            node="agent",
            hlc_at=10,
            events=runtime_events,
            **ids,
        ),
    ]
    if dispatch_at is not None:
        rows.append(
            span(
                f"execute_tool {tool}",
                dispatch_at + 10,
                commit_at + 300,
                span_id="tool",
                parent="agent",
                layer="tool",
                node="tools",
                hlc_at=dispatch_at + 10,
                attrs=call,
                events=tool_events,
                status="error" if outcome == "failed" else "ok",
                **ids,
            )
        )
        for i, (status, replayed) in enumerate(acks):
            at = dispatch_at + 50 + 10 * i
            rows.append(
                span(
                    "POST relay",
                    at,
                    at + 20,
                    span_id=f"relay{i}",
                    parent="tool",
                    layer="third_party",
                    node="relay",
                    hlc_at=at,
                    kind="client",
                    **ids,
                    events=[
                        event(
                            c.EV_THIRD_PARTY_ACK,
                            at + 15,
                            hlc_at=at + 15,
                            **ref,
                            **{c.THIRD_PARTY_STATUS: status, c.THIRD_PARTY_REPLAYED: replayed},
                        )
                    ],
                )
            )
    billing = []
    if charged and dispatch_at is not None:
        billing.append(
            event(
                c.EV_BILLING_CHARGED,
                2600,
                hlc_at=2600,
                **ref,
                **{c.BILLING_KIND: "side_effect", c.BILLING_AMOUNT: 0.5},
            )
        )
    if tokens_billed:
        billing.append(
            event(
                c.EV_BILLING_CHARGED,
                2605,
                hlc_at=2605,
                **{c.BILLING_KIND: "tokens", c.BILLING_TOKENS: tokens_billed, c.BILLING_AMOUNT: 0.01},
            )
        )
    if billing:
        rows.append(
            span(
                "charge",
                2590,
                2610,
                span_id="billing",
                parent="http",
                layer="billing",
                node="billing",
                hlc_at=2590,
                events=billing,
                **ids,
            )
        )
    return rows
