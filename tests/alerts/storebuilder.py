"""Writes a small store by hand: SEGMENT_SCHEMA rows in a Parquet segment plus the real catalog.

Used until (and beside) the simulator and the collector: tests that need an exact incident at an
exact time build it here, so what they assert is visible in the test itself.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from turnlens.kernel import contract
from turnlens.kernel.schema import SEGMENT_SCHEMA
from turnlens.queries.catalog import write_catalog

MS = 1_000_000  # nanoseconds in a millisecond


def hlc(ms: int, logical: int = 0) -> int:
    return contract.pack_hlc(ms, logical)


@dataclass
class StoreBuilder:
    """Collects spans, then writes them as one segment and builds the catalog over it."""

    store: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def span(
        self,
        *,
        session: str,
        turn: str,
        layer: str,
        name: str,
        start_ms: int,
        end_ms: int | None,
        node: str | None = None,
        trace: str | None = None,
        skew_ms: int = 0,
        events: list[tuple[str, int, dict[str, Any]]] = (),
        attributes: dict[str, Any] | None = None,
        parent: str | None = None,
    ) -> str:
        """One span; `skew_ms` is how far the node's wall clock lags its HLC. Events are (name, ms, attrs)."""
        span_id = f"{next(self._ids):016x}"
        trace_id = trace or f"{abs(hash((session, turn))) % (1 << 64):032x}"
        node = node or f"{layer}-1"
        attrs = {
            contract.SESSION_ID: session,
            contract.TURN_ID: turn,
            contract.LAYER: layer,
            contract.HLC: hlc(start_ms),
            **(attributes or {}),
        }
        self.rows.append(
            {
                "trace_id": trace_id,
                "span_id": span_id,
                "parent_span_id": parent,
                "trace_state": None,
                "flags": 1,
                "name": name,
                "kind": "internal",
                "start_time_unix_nano": (start_ms - skew_ms) * MS,
                "end_time_unix_nano": None if end_ms is None else (end_ms - skew_ms) * MS,
                "attributes": json.dumps(attrs),
                "dropped_attributes_count": 0,
                "events": [
                    {
                        "time_unix_nano": (ms - skew_ms) * MS,
                        "name": ev,
                        "attributes": json.dumps({contract.HLC: hlc(ms), **ev_attrs}),
                        "dropped_attributes_count": 0,
                        "hlc": hlc(ms),
                    }
                    for ev, ms, ev_attrs in events
                ],
                "dropped_events_count": 0,
                "links": [],
                "dropped_links_count": 0,
                "status_code": "unset",
                "status_message": None,
                "resource_attributes": json.dumps(
                    {contract.SERVICE_NAME: f"agent-{layer}", contract.SERVICE_INSTANCE_ID: node}
                ),
                "resource_dropped_attributes_count": 0,
                "resource_schema_url": None,
                "scope_name": "tests",
                "scope_version": None,
                "scope_attributes": "{}",
                "scope_dropped_attributes_count": 0,
                "scope_schema_url": None,
                "service_name": f"agent-{layer}",
                "node": node,
                "span_session_id": session,
                "span_turn_id": turn,
                "layer": layer,
                "hlc": hlc(start_ms),
                "received_unix_nano": end_ms or start_ms,
            }
        )
        return span_id

    def write(self, queries_dir: Path | None = None) -> Path:
        """One segment under segments/date=…/, the empty placeholder, and the catalog."""
        segments = self.store / "segments"
        placeholder = segments / "date=1970-01-01"
        placeholder.mkdir(parents=True, exist_ok=True)
        pq.write_table(SEGMENT_SCHEMA.empty_table(), placeholder / "empty.parquet")
        part = segments / "date=2026-01-01"
        part.mkdir(parents=True, exist_ok=True)
        seq = len(list(part.glob("*.parquet"))) + 1
        pq.write_table(
            pa.Table.from_pylist(self.rows, schema=SEGMENT_SCHEMA), part / f"tests-{seq:04d}.parquet"
        )
        self.rows = []
        glob = str(segments / "*" / "*.parquet")
        if queries_dir is None:
            write_catalog(self.store, glob)
        else:
            write_catalog(self.store, glob, queries_dir)
        return self.store


def cancelled_turn(b: StoreBuilder, *, session: str, turn: str, t0_ms: int, ack_ms: int = 80,
                   tool: str = "send_email", tier: str = "hard_irreversible",
                   commit_after_cancel: bool = True,
                   call: str | None = None, key: str | None = None, node_skew_ms: int = 0) -> None:
    """A streaming turn the user stopped at `t0_ms`: five layers, one eager tool call.

    With `commit_after_cancel` the tool commits 250 ms after the stop and the third party answers
    `250 OK` (cancelled_but_committed); the slowest layer acknowledges the cancel `ack_ms` after it.
    """
    call = call or f"call-{turn}"
    key = key or f"key-{turn}"
    tool_attrs = {contract.TOOL_NAME: tool, contract.TOOL_CALL_ID: call, contract.IDEMPOTENCY_KEY: key,
                  contract.TOOL_TIER: tier, contract.TOOL_DISPATCH: "eager", contract.TOOL_BILLABLE: False,
                  contract.TOOL_REQUIRES_APPROVAL: False}
    common = {"session": session, "turn": turn}
    end = t0_ms + max(ack_ms, 300) + 10
    b.span(**common, layer="http", name="POST /chat", start_ms=t0_ms - 3000, end_ms=end, events=[
        ("turn.user_input", t0_ms - 3000, {contract.INPUT_KIND: "message"}),
        ("cancel.requested", t0_ms, {contract.CANCEL_ORIGIN: "user_clicked"}),
        ("cancel.acknowledged", t0_ms + min(ack_ms, 40), {})])
    b.span(**common, layer="stream", name="stream", start_ms=t0_ms - 2990, end_ms=end, events=[
        ("stream.progress", t0_ms - 1000, {contract.STREAM_TOKENS: 40}),
        ("cancel.received", t0_ms + 10, {}),
        ("cancel.acknowledged", t0_ms + min(ack_ms, 60), {}),
        ("stream.completed", t0_ms + min(ack_ms, 60), {contract.FINISH_REASONS: ["cancelled"]})])
    b.span(**common, layer="runtime", name="invoke_agent", start_ms=t0_ms - 2980, end_ms=end, events=[
        ("tool.dispatched", t0_ms - 500, tool_attrs),
        ("cancel.received", t0_ms + 20, {}),
        ("cancel.acknowledged", t0_ms + min(ack_ms, 70), {})])
    tool_events = [("tool.prepared", t0_ms - 480, tool_attrs), ("cancel.received", t0_ms + 30, {})]
    if commit_after_cancel:
        tool_events.append(("tool.committed", t0_ms + 250, tool_attrs))
    tool_events.append(("cancel.acknowledged", t0_ms + ack_ms, {}))
    b.span(**common, layer="tool", name=f"execute_tool {tool}", start_ms=t0_ms - 490, end_ms=end,
           attributes=tool_attrs, events=tool_events, skew_ms=node_skew_ms)
    if commit_after_cancel:
        b.span(**common, layer="third_party", name="POST relay", start_ms=t0_ms + 200, end_ms=t0_ms + 260,
               attributes={contract.TOOL_CALL_ID: call, contract.IDEMPOTENCY_KEY: key},
               events=[("third_party.ack", t0_ms + 255, {contract.THIRD_PARTY_STATUS: "250 OK",
                                                         contract.IDEMPOTENCY_KEY: key,
                                                         contract.TOOL_CALL_ID: call})])
