"""Given-rows fixtures for the view tests: spans written as real Parquet segments, then a real catalog.

`kit.span(...)` builds one row of SEGMENT_SCHEMA with times in milliseconds after T0, `kit.event(...)`
one span event; `kit.store(rows)` writes them the way the collector lays a store out and returns a
read-only connection to the catalog that write_catalog built over them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from turnlens.collector import contract as c
from turnlens.collector.schema import SEGMENT_SCHEMA
from turnlens.queries import catalog

T0_MS = 1_795_000_000_000  # 2026-11-18, a whole second: every test time is an offset from it
SEGMENTS_GLOB_PARTS = ("segments", "*", "*.parquet")
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
        attrs[c.HLC] = packed
    return {
        "time_unix_nano": ns(at),
        "name": name,
        "attributes": json.dumps(attrs),
        "dropped_attributes_count": 0,
        "hlc": packed,
    }


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
    sid = span_id or f"sp{next(_ids)}"
    span_session = attributes.get(c.SESSION_ID, attributes.get(c.GEN_AI_CONVERSATION_ID))
    inferred = c.infer_layer(kind, attributes)
    return {
        "trace_id": trace.encode().hex().ljust(32, "0")[:32],
        "span_id": sid.encode().hex().ljust(16, "0")[:16],
        "parent_span_id": parent.encode().hex().ljust(16, "0")[:16] if parent else None,
        "trace_state": None,
        "flags": 1,
        "name": name,
        "kind": kind,
        "start_time_unix_nano": ns(start),
        "end_time_unix_nano": ns(end) if end is not None else None,
        "attributes": json.dumps(attributes),
        "dropped_attributes_count": 0,
        "events": events or [],
        "dropped_events_count": 0,
        "links": [
            {
                "trace_id": t.encode().hex().ljust(32, "0")[:32],
                "span_id": s.encode().hex().ljust(16, "0")[:16],
                "trace_state": None,
                "attributes": "{}",
                "dropped_attributes_count": 0,
                "flags": 1,
            }
            for t, s in (links or [])
        ],
        "dropped_links_count": 0,
        "status_code": status,
        "status_message": None,
        "resource_attributes": json.dumps({c.SERVICE_NAME: service or node, c.SERVICE_INSTANCE_ID: node}),
        "resource_dropped_attributes_count": 0,
        "resource_schema_url": None,
        "scope_name": "tests",
        "scope_version": None,
        "scope_attributes": "{}",
        "scope_dropped_attributes_count": 0,
        "scope_schema_url": None,
        "service_name": service or node,
        "node": node,
        "span_session_id": span_session,
        "span_turn_id": attributes.get(c.TURN_ID),
        "layer": inferred,
        "hlc": packed,
        "received_unix_nano": ns(start) + received,
    }


def trace_hex(name: str) -> str:
    return name.encode().hex().ljust(32, "0")[:32]


def span_hex(name: str) -> str:
    return name.encode().hex().ljust(16, "0")[:16]


def write_store(
    store_dir: Path,
    rows: list[dict],
    *,
    registry_toml: str | None = None,
    settings_toml: str | None = None,
) -> Path:
    """Writes rows as one segment plus the empty placeholder, then the catalog, as the collector would."""
    empty = store_dir / "segments" / "date=1970-01-01" / "empty.parquet"
    empty.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(SEGMENT_SCHEMA.empty_table(), empty)
    if rows:
        day = store_dir / "segments" / "date=2026-11-18"
        day.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=SEGMENT_SCHEMA), day / "test-0.parquet")
    if registry_toml is not None:
        (store_dir / "tool_registry.toml").write_text(registry_toml)
    if settings_toml is not None:
        (store_dir / "settings.toml").write_text(settings_toml)
    catalog.write_catalog(store_dir, str(store_dir.joinpath(*SEGMENTS_GLOB_PARTS)))
    return store_dir


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
        span=span, event=event, store=store, rows=rows_of, hlc=hlc, ns=ns, T0_MS=T0_MS,
        trace_hex=trace_hex, span_hex=span_hex, contract=c,
    )
    for con in connections:
        con.close()


Builder = Callable[..., dict]
