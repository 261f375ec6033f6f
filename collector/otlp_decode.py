"""OTLP trace requests (protobuf or OTLP/JSON) → a pyarrow Table of SEGMENT_SCHEMA rows, with no I/O.

The receivers' entry point. Protobuf is walked by the compiled _otlp_wire (collector/_otlp_wire.pyx),
which writes Arrow column buffers straight from the wire bytes and calls back here (through the
hooks below) only for what is rare; a request it finds malformed goes to the pure-Python reference
decoder (otlp_reference), which explains it. OTLP/JSON is otlp_json's. Invalid spans are counted and
explained rather than failing the request, so receivers can answer with OTLP partial success.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Final

import pyarrow as pa
from turnlens.collector.otlp_attributes import cached_kv_entry, check_attributes, raw_attributes
from turnlens.collector.otlp_json import decode_json, decode_json_document
from turnlens.collector.otlp_reference import decode_protobuf_reference
from turnlens.collector.otlp_rows import (
    READ_KEYS,
    DecodeResult,
    OtlpDecodeError,
    as_int,
    context_columns,
    contract_values,
    id_problem,
    resource_identity,
    time_problem,
)
from turnlens.kernel.schema import EVENT_TYPE, LINK_TYPE, SEGMENT_SCHEMA

try:
    from turnlens.collector import _otlp_wire
except ImportError as exc:  # never fall back to a decoder ten times slower without saying so
    raise ImportError(
        "turnlens.collector._otlp_wire, the compiled OTLP protobuf decoder, is not built: reinstall "
        "with `make install` or `pip install -e .` (needs a C compiler and the Python headers)"
    ) from exc

__all__ = [
    "DecodeResult", "OtlpDecodeError", "decode_json", "decode_json_document", "decode_protobuf",
    "decode_protobuf_reference",
]


def decode_protobuf(body: bytes | bytearray, *, received_unix_nano: int | None = None) -> DecodeResult:
    """Decodes a serialized ExportTraceServiceRequest; raises OtlpDecodeError if it is not one.

    The compiled walker reads it; a request it finds malformed (or whose attributes it refuses) is
    decoded by the reference instead, which raises the error that explains it, or, for wire forms the
    walker leaves alone (a singular message sent twice, which protobuf merges), decodes it.
    """
    received = received_unix_nano if received_unix_nano is not None else time.time_ns()
    try:
        walk = _otlp_wire.walk(body, _WIRE_HOOKS)
    except (_otlp_wire.NotPlainWire, OtlpDecodeError):
        return decode_protobuf_reference(bytes(body), received_unix_nano=received)
    reasons = Counter(walk.reasons)
    if not walk.spans:
        return DecodeResult(SEGMENT_SCHEMA.empty_table(), len(walk.reasons), reasons)
    return DecodeResult(_walk_table(walk, received), len(walk.reasons), reasons)


def _walk_table(walk: _otlp_wire.Walk, received: int) -> pa.Table:
    """SEGMENT_SCHEMA's table of the walker's column buffers, each copied once into Arrow's."""
    n = walk.spans
    columns: dict[str, pa.Array] = {}
    for k, name in enumerate(_otlp_wire.STRING_COLUMNS):
        rows, validity, nulls, offsets, data = walk.take_string_column(k)
        buffers = [validity and pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)]
        columns[name] = pa.Array.from_buffers(pa.string(), rows, buffers, null_count=nulls)
    for k, name in enumerate(_otlp_wire.INT_COLUMNS):
        rows, validity, nulls, data = walk.take_int_column(k)
        buffers = [validity and pa.py_buffer(validity), pa.py_buffer(data)]
        columns[name] = pa.Array.from_buffers(pa.int64(), rows, buffers, null_count=nulls)
    event_offsets, link_offsets = walk.take_list_offsets()
    for name, item, offsets in (("events", EVENT_TYPE, event_offsets), ("links", LINK_TYPE, link_offsets)):
        fields = list(item)
        values = pa.StructArray.from_arrays([columns[f"{name}.{f.name}"] for f in fields], fields=fields)
        offsets_array = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(offsets)])
        columns[name] = pa.ListArray.from_arrays(offsets_array, values)
    columns.update(context_columns(walk.contexts, n, received))
    return pa.Table.from_arrays([columns[f.name] for f in SEGMENT_SCHEMA], schema=SEGMENT_SCHEMA)


def _span_problem(trace_id: bytes, span_id: bytes, parent: bytes, start: int, end: int) -> str:
    return (
        id_problem("trace_id", trace_id, 16) or id_problem("span_id", span_id, 8)
        or id_problem("parent_span_id", parent, 8, optional=True)
        or time_problem(start, end) or "invalid span"
    )


def _link_problem(trace_id: bytes, span_id: bytes) -> str:
    return id_problem("link trace_id", trace_id, 16) or id_problem("link span_id", span_id, 8) or ""


def _resource_values(raws: list[bytes]) -> tuple[str, str | None, str | None]:
    """A resource's attributes JSON, service name and node."""
    resource_json, read = raw_attributes(raws)
    return (resource_json, *resource_identity(read))


def _context(
    resource: tuple[str, str | None, str | None], resource_dropped: int, resource_schema_url: str,
    scope_name: str, scope_version: str, scope_raws: list[bytes], scope_dropped: int, scope_schema_url: str,
) -> tuple[Any, ...]:
    """The _CONTEXT_FIELDS values of a run of spans, as decode_protobuf_reference makes them."""
    resource_json, service, node = resource
    return (
        resource_json, resource_dropped, resource_schema_url or None, scope_name or None,
        scope_version or None, raw_attributes(scope_raws)[0], scope_dropped, scope_schema_url or None,
        service, node,
    )


_WIRE_HOOKS: Final = (
    cached_kv_entry, contract_values, as_int, _span_problem, _link_problem, _resource_values, _context,
    check_attributes,
)
if frozenset(_otlp_wire.READ_KEYS) != READ_KEYS:
    raise ImportError("_otlp_wire.READ_KEYS differs from otlp_rows.READ_KEYS: rebuild it")

