"""Stores written by hand for tests: real Parquet segments of SEGMENT_SCHEMA rows and the real catalog.

Tests that need an exact incident at an exact time build it here, so what they assert is visible in the
test itself. One row builder (`span_row`, `event_row`) and one writer (`write_store`) serve every test
folder; `StoreBuilder` and `cancelled_turn` are the incident-shaped front the alert, export and dashboard
tests use, and `tests/queries/conftest.py` the given-rows front of the view tests.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from turnlens.kernel import contract, layout
from turnlens.kernel.schema import SEGMENT_SCHEMA
from turnlens.queries.catalog import write_catalog

MS = 1_000_000  # nanoseconds in a millisecond


def rounded(value: Any) -> Any:
    """A float to 9 decimals (a sum's last bit depends on the order DuckDB's threads added it up), in rows and
    lists alike: what tests compare of two computations of the same rows."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, list | tuple):
        return type(value)(rounded(item) for item in value)
    if isinstance(value, dict):  # a struct column
        return {key: rounded(item) for key, item in value.items()}
    return value


def hlc(ms: int, logical: int = 0) -> int:
    return contract.pack_hlc(ms, logical)


def event_row(name: str, time_ns: int, attributes: dict[str, Any], hlc: int | None = None) -> dict[str, Any]:
    """One span event; an HLC given here is also put among its attributes, as the SDK helpers do."""
    if hlc is not None:
        attributes = {contract.HLC: hlc, **attributes}
    return {
        "time_unix_nano": time_ns,
        "name": name,
        "attributes": json.dumps(attributes),
        "dropped_attributes_count": 0,
        "hlc": hlc,
    }


def span_row(
    *,
    trace_id: str,
    span_id: str,
    name: str,
    start_ns: int,
    end_ns: int | None,
    attributes: dict[str, Any],
    node: str,
    service: str,
    layer: str | None,
    session: str | None,
    turn: str | None,
    hlc: int | None,
    received_ns: int,
    events: Sequence[dict[str, Any]] = (),
    links: Iterable[tuple[str, str]] = (),
    parent_span_id: str | None = None,
    kind: str = "internal",
    status: str = "unset",
    scope: str = "tests",
) -> dict[str, Any]:
    """One stored span as the collector writes it: the OTLP fields plus the typed contract columns."""
    return {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": parent_span_id,
        "trace_state": None,
        "flags": 1,
        "name": name,
        "kind": kind,
        "start_time_unix_nano": start_ns,
        "end_time_unix_nano": end_ns,
        "attributes": json.dumps(attributes),
        "dropped_attributes_count": 0,
        "events": list(events),
        "dropped_events_count": 0,
        "links": [
            {
                "trace_id": link_trace,
                "span_id": link_span,
                "trace_state": None,
                "attributes": "{}",
                "dropped_attributes_count": 0,
                "flags": 1,
            }
            for link_trace, link_span in links
        ],
        "dropped_links_count": 0,
        "status_code": status,
        "status_message": None,
        "resource_attributes": json.dumps(
            {contract.SERVICE_NAME: service, contract.SERVICE_INSTANCE_ID: node}
        ),
        "resource_dropped_attributes_count": 0,
        "resource_schema_url": None,
        "scope_name": scope,
        "scope_version": None,
        "scope_attributes": "{}",
        "scope_dropped_attributes_count": 0,
        "scope_schema_url": None,
        "service_name": service,
        "node": node,
        "span_session_id": session,
        "span_turn_id": turn,
        "layer": layer,
        "hlc": hlc,
        "received_unix_nano": received_ns,
    }


def write_store(
    store_dir: Path,
    rows: list[dict[str, Any]],
    *,
    registry_toml: str | None = None,
    settings_toml: str | None = None,
    queries_dir: Path | None = None,
) -> Path:
    """Writes rows as one more segment in the partition of their first start (beside the empty
    placeholder the collector keeps), any registry or settings file, then the catalog."""
    segments = store_dir / layout.SEGMENTS_DIR
    placeholder = segments / "date=1970-01-01" / "empty.parquet"
    placeholder.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(SEGMENT_SCHEMA.empty_table(), placeholder)
    if rows:
        first_ns = min(row["start_time_unix_nano"] for row in rows)
        day = datetime.fromtimestamp(first_ns / 1e9, UTC).date().isoformat()
        partition = segments / f"{layout.PARTITION_PREFIX}{day}"
        partition.mkdir(parents=True, exist_ok=True)
        sequence = len(list(partition.glob(f"*{layout.SEGMENT_SUFFIX}"))) + 1
        table = pa.Table.from_pylist(rows, schema=SEGMENT_SCHEMA)
        pq.write_table(table, partition / f"tests-{sequence:04d}{layout.SEGMENT_SUFFIX}")
    if registry_toml is not None:
        (store_dir / "tool_registry.toml").write_text(registry_toml)
    if settings_toml is not None:
        (store_dir / "settings.toml").write_text(settings_toml)
    glob = layout.segments_glob(store_dir)
    if queries_dir is None:
        write_catalog(store_dir, glob)
    else:
        write_catalog(store_dir, glob, queries_dir)
    return store_dir


@dataclass
class StoreBuilder:
    """Collects spans of whole incidents, then writes them as one segment and builds the catalog."""

    store: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def span(
        self,
        session: str,
        turn: str,
        layer: str,
        name: str,
        start_ms: int,
        end_ms: int | None,
        *,
        node: str | None = None,
        trace: str | None = None,
        skew_ms: int = 0,
        events: Iterable[tuple[str, int, dict[str, Any]]] = (),
        attributes: dict[str, Any] | None = None,
        parent: str | None = None,
        scope: str = "tests",
    ) -> str:
        """One span at absolute ms; `skew_ms` is how far the node's wall clock lags its HLC. Events are
        (name, ms, attributes). Returns the span id."""
        span_id = f"{next(self._ids):016x}"
        node = node or f"{layer}-1"
        attrs = {
            contract.SESSION_ID: session,
            contract.TURN_ID: turn,
            contract.LAYER: layer,
            contract.HLC: hlc(start_ms),
            **(attributes or {}),
        }
        self.rows.append(
            span_row(
                trace_id=trace or f"{abs(hash((session, turn))) % (1 << 64):032x}",
                span_id=span_id,
                parent_span_id=parent,
                name=name,
                start_ns=(start_ms - skew_ms) * MS,
                end_ns=None if end_ms is None else (end_ms - skew_ms) * MS,
                attributes=attrs,
                events=[event_row(ev, (ms - skew_ms) * MS, ev_attrs, hlc(ms)) for ev, ms, ev_attrs in events],
                node=node,
                service=f"agent-{layer}",
                layer=layer,
                session=session,
                turn=turn,
                hlc=hlc(start_ms),
                received_ns=(end_ms or start_ms) * MS,
                scope=scope,
            )
        )
        return span_id

    def write(self, queries_dir: Path | None = None) -> Path:
        """One more segment of the spans collected since the last write, and the catalog."""
        write_store(self.store, self.rows, queries_dir=queries_dir)
        self.rows = []
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
