"""OTLP trace requests (protobuf or OTLP/JSON) → a pyarrow Table of SEGMENT_SCHEMA rows, with no I/O.

Invalid spans are counted and explained rather than failing the request, so receivers can answer
with OTLP partial success. Protobuf is walked by the compiled _otlp_wire (collector/_otlp_wire.pyx),
which writes Arrow column buffers straight from the wire bytes and calls back here only for what is
rare; `decode_protobuf_reference` is the pure-Python decoder it is tested against, and the one that
explains a request the walker finds malformed. The reference parses with a wire-compatible copy of
the OTLP messages whose attribute lists are raw bytes, and turns each distinct serialized KeyValue
into its JSON fragment once (most attribute values repeat from span to span).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Final

import orjson
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from turnlens.kernel import contract
from turnlens.kernel.schema import EVENT_TYPE, LINK_TYPE, SEGMENT_SCHEMA

try:
    from turnlens.collector import _otlp_wire
except ImportError as exc:  # never fall back to a decoder ten times slower without saying so
    raise ImportError(
        "turnlens.collector._otlp_wire, the compiled OTLP protobuf decoder, is not built: reinstall "
        "with `make install` or `pip install -e .` (needs a C compiler and the Python headers)"
    ) from exc

SPAN_KINDS: Final = ("unspecified", "internal", "server", "client", "producer", "consumer")
STATUS_CODES: Final = ("unset", "ok", "error")
INT64_MAX: Final = (1 << 63) - 1
_DOUBLE: Final = struct.Struct("<d")

# Attribute keys whose values the collector reads (everything else is only serialized): the
# contract's columns, and what contract.infer_layer looks at.
_READ_KEYS: Final = frozenset(
    {
        contract.SERVICE_NAME, contract.SERVICE_INSTANCE_ID, contract.SESSION_ID,
        contract.GEN_AI_CONVERSATION_ID, contract.TURN_ID, contract.LAYER, contract.HLC,
        contract.GEN_AI_OPERATION_NAME, contract.OPENINFERENCE_SPAN_KIND, contract.SERVER_ADDRESS,
        contract.PEER_SERVICE, contract.HTTP_REQUEST_METHOD, contract.HTTP_METHOD_OLD,
    }
)
_CACHE_LIMIT: Final = 100_000  # distinct serialized KeyValues remembered (~30 MB at worst)


class OtlpDecodeError(ValueError):
    """The request body is not an OTLP trace request at all (answered 400 / INVALID_ARGUMENT)."""


@dataclass
class DecodeResult:
    """The stored rows of one request, and how many spans were rejected and why."""

    table: pa.Table
    rejected: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def accepted(self) -> int:
        return self.table.num_rows

    def error_message(self) -> str:
        """OTLP partial success `error_message`: each reason with its count, most frequent first."""
        if not self.rejected:
            return ""
        parts = [f"{count} × {reason}" for reason, count in self.reasons.most_common(5)]
        return f"rejected {self.rejected} span(s): " + "; ".join(parts)


# --- the wire-compatible message types ----------------------------------------------------------
# Field numbers and wire types are OTLP's (opentelemetry/proto/trace/v1/trace.proto); every
# `attributes` field is `repeated bytes`, which reads a KeyValue's serialized form as it is.


def _raw_message_classes() -> dict[str, Any]:
    fdp = descriptor_pb2.FieldDescriptorProto
    one, many = fdp.LABEL_OPTIONAL, fdp.LABEL_REPEATED
    types = {
        "bytes": fdp.TYPE_BYTES, "string": fdp.TYPE_STRING, "uint32": fdp.TYPE_UINT32,
        "int32": fdp.TYPE_INT32, "fixed32": fdp.TYPE_FIXED32, "fixed64": fdp.TYPE_FIXED64,
    }
    messages: dict[str, list[tuple[str, int, str, bool]]] = {
        "Request": [("resource_spans", 1, "ResourceSpans", True)],
        "ResourceSpans": [
            ("resource", 1, "Resource", False), ("scope_spans", 2, "ScopeSpans", True),
            ("schema_url", 3, "string", False),
        ],
        "Resource": [("attributes", 1, "bytes", True), ("dropped_attributes_count", 2, "uint32", False)],
        "ScopeSpans": [
            ("scope", 1, "Scope", False), ("spans", 2, "Span", True), ("schema_url", 3, "string", False),
        ],
        "Scope": [
            ("name", 1, "string", False), ("version", 2, "string", False), ("attributes", 3, "bytes", True),
            ("dropped_attributes_count", 4, "uint32", False),
        ],
        "Span": [
            ("trace_id", 1, "bytes", False), ("span_id", 2, "bytes", False),
            ("trace_state", 3, "string", False), ("parent_span_id", 4, "bytes", False),
            ("flags", 16, "fixed32", False), ("name", 5, "string", False), ("kind", 6, "int32", False),
            ("start_time_unix_nano", 7, "fixed64", False), ("end_time_unix_nano", 8, "fixed64", False),
            ("attributes", 9, "bytes", True), ("dropped_attributes_count", 10, "uint32", False),
            ("events", 11, "Event", True), ("dropped_events_count", 12, "uint32", False),
            ("links", 13, "Link", True), ("dropped_links_count", 14, "uint32", False),
            ("status", 15, "Status", False),
        ],
        "Event": [
            ("time_unix_nano", 1, "fixed64", False), ("name", 2, "string", False),
            ("attributes", 3, "bytes", True), ("dropped_attributes_count", 4, "uint32", False),
        ],
        "Link": [
            ("trace_id", 1, "bytes", False), ("span_id", 2, "bytes", False),
            ("trace_state", 3, "string", False), ("attributes", 4, "bytes", True),
            ("dropped_attributes_count", 5, "uint32", False), ("flags", 6, "fixed32", False),
        ],
        "Status": [("message", 2, "string", False), ("code", 3, "int32", False)],
    }
    file_proto = descriptor_pb2.FileDescriptorProto(
        name="turnlens/otlp_raw.proto", package="turnlens.raw", syntax="proto3"
    )
    for message_name, fields in messages.items():
        message = file_proto.message_type.add(name=message_name)
        for name, number, type_name, repeated in fields:
            spec = message.field.add(name=name, number=number, label=many if repeated else one)
            if type_name in types:
                spec.type = types[type_name]
            else:
                spec.type = fdp.TYPE_MESSAGE
                spec.type_name = f".turnlens.raw.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"turnlens.raw.{name}"))
        for name in messages
    }


_RAW = _raw_message_classes()
RawRequest: Final = _RAW["Request"]


# --- attribute values ---------------------------------------------------------------------------


def any_value_to_python(value: AnyValue) -> Any:
    """An OTLP AnyValue as a JSON-ready Python value (bytes as base64, kvlists as objects)."""
    kind = value.WhichOneof("value")
    if kind is None or kind == "string_value_strindex":
        return None
    if kind == "array_value":
        return [any_value_to_python(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value_to_python(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, kind)


# A cached KeyValue: its `"key":value` JSON fragment, and (key, value) when the collector reads it.
_Entry = tuple[str, tuple[str, Any] | None]
_kv_cache: dict[bytes, _Entry] = {}
# The bytes before a short KeyValue's value, 0x0a <key length> key 0x12 <value length> <value tag>,
# → ('"key":', key, read, size of the whole KeyValue, position of the value's payload).
_Header = tuple[str, str, bool, int, int]
_key_cache: dict[bytes, _Header] = {}
_dumps = orjson.dumps
_json_string = json.encoder.encode_basestring  # C; the same text as orjson for every code point
_FIXED64: Final = _DOUBLE.size
_first = itemgetter(0)  # an entry's fragment


class _Volatility:
    """Which keys take a new value nearly every time (ids, clocks, counters): caching those only evicts.

    Misses are counted per key over epochs of EPOCH misses; a key with more than a tenth of an
    epoch's misses is not cached during the next epoch.
    """

    EPOCH = 50_000

    def __init__(self) -> None:
        self.misses: Counter[str] = Counter()
        self.total = 0
        self.volatile: frozenset[str] = frozenset()

    def cacheable(self, key: str) -> bool:
        if key in self.volatile:
            return False
        self.misses[key] += 1
        self.total += 1
        if self.total >= self.EPOCH:
            counts = list(self.misses.items())  # one C call: other threads may be counting
            self.volatile = frozenset(k for k, n in counts if n * 10 > self.EPOCH)
            self.misses.clear()
            self.total = 0
        return True


_volatility = _Volatility()


def _kv_entry(raw: bytes) -> _Entry:
    """Converts one serialized KeyValue the first time it is seen; later sightings hit the cache.

    Short keys with string, int, bool or double values (nearly all of them) are read straight from
    the wire bytes: the bytes before the value repeat for every value of a key, so what they say
    (key, value type and length) is looked up once, and only the value itself is converted here.
    """
    try:
        header = _key_cache.get(raw[: raw[1] + 5]) or _header(raw)
    except IndexError:  # shorter than any short KeyValue
        header = None
    entry = _kv_entry_short(raw, header) if header is not None else None
    if entry is None or header is None:
        entry, key = _kv_entry_parsed(raw)
    else:
        key = header[1]
    if key not in _volatility.volatile and _volatility.cacheable(key):  # skips a call for ids and clocks
        if len(_kv_cache) >= _CACHE_LIMIT:
            _kv_cache.clear()
        _kv_cache[raw] = entry
    return entry


def _header(raw: bytes) -> _Header | None:
    # KeyValue wire form: 0x0a <key length> key 0x12 <value length> AnyValue, lengths < 128.
    p = raw[1] + 2
    if raw[0] != 0x0A or raw[1] > 0x7F or len(raw) < p + 3 or raw[p] != 0x12 or raw[p + 1] > 0x7F:
        return None
    if raw[p + 2] not in (0x0A, 0x18, 0x10, 0x21):
        return None
    try:
        key = raw[2:p].decode()
    except UnicodeDecodeError:
        return None  # the parsed path says why
    header = (_json_string(key) + ":", key, key in _READ_KEYS, p + 2 + raw[p + 1], p + 3)
    if len(_key_cache) < _CACHE_LIMIT:
        _key_cache[raw[: p + 3]] = header
    return header


def _kv_entry_short(raw: bytes, header: _Header) -> _Entry | None:
    key_fragment, key, read, size, at = header
    if len(raw) != size:
        return None
    tag = raw[at - 1]
    value: Any
    if tag == 0x0A:  # string_value
        if size == at or raw[at] + at + 1 != size:
            return None
        try:
            value = raw[at + 1 :].decode()
        except UnicodeDecodeError:
            raise OtlpDecodeError(f"attribute {key!r}: string value is not UTF-8") from None
        return key_fragment + _json_string(value), (key, value) if read else None
    if tag == 0x18:  # int_value (varint)
        try:
            value = AnyValue.FromString(raw[at - 1 :]).int_value
        except DecodeError:
            return None  # the parsed path says why
        return key_fragment + str(value), (key, value) if read else None
    if tag == 0x10 and size == at + 1:  # bool_value
        value = raw[at] != 0
        return key_fragment + ("true" if value else "false"), (key, value) if read else None
    if tag == 0x21 and size == at + _FIXED64:  # double_value (fixed64)
        value = _DOUBLE.unpack_from(raw, at)[0]
        return key_fragment + _dumps(value).decode(), (key, value) if read else None
    return None


def _kv_entry_parsed(raw: bytes) -> tuple[_Entry, str]:
    try:
        kv = KeyValue.FromString(raw)
    except DecodeError as exc:
        raise OtlpDecodeError(f"undecodable attribute: {exc}") from None
    value = any_value_to_python(kv.value)
    fragment = _dumps({kv.key: value})[1:-1].decode()
    return (fragment, (kv.key, value) if kv.key in _READ_KEYS else None), kv.key


def _raw_attributes(raws: Iterable[bytes]) -> tuple[str, dict[str, Any]]:
    """The JSON object of serialized KeyValues, and the values of the keys the collector reads."""
    get = _kv_cache.get
    entries = [get(raw) or _kv_entry(raw) for raw in raws]
    read = dict(entry[1] for entry in entries if entry[1] is not None)
    return "{" + ",".join([entry[0] for entry in entries]) + "}", read


def _as_int(value: Any) -> int | None:
    """An integer attribute, also from its string form (JSON exporters and some SDKs send those)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -INT64_MAX - 1 <= value <= INT64_MAX else None
    if isinstance(value, str):
        try:
            return _as_int(int(value))
        except ValueError:
            return None
    if isinstance(value, float) and value.is_integer() and not math.isinf(value):
        return _as_int(int(value))
    return None


def _as_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# --- the table builder --------------------------------------------------------------------------

# A span's own values, in this order; resource and scope values are added per run of spans.
_SPAN_FIELDS: Final = (
    "trace_id", "span_id", "parent_span_id", "trace_state", "flags", "name", "kind",
    "start_time_unix_nano", "end_time_unix_nano", "attributes", "dropped_attributes_count",
    "dropped_events_count", "dropped_links_count", "status_code", "status_message",
    "span_session_id", "span_turn_id", "layer", "hlc",
)
_TYPES: Final = {f.name: f.type for f in SEGMENT_SCHEMA}
_CONTEXT_FIELDS: Final = (
    "resource_attributes", "resource_dropped_attributes_count", "resource_schema_url", "scope_name",
    "scope_version", "scope_attributes", "scope_dropped_attributes_count", "scope_schema_url",
    "service_name", "node",
)
# (time_unix_nano, name, attributes, dropped_attributes_count, hlc), EVENT_TYPE's order
_Event = tuple[int, str, str | bytes, int, int | None]  # attributes: str, or orjson bytes from OTLP/JSON
# (trace_id, span_id, trace_state, attributes, dropped_attributes_count, flags), LINK_TYPE's order
_Link = tuple[str, str, str | None, str | bytes, int, int]


class _Rows:
    """The rows of one request as tuples, turned into Arrow every CHUNK_SPANS spans.

    Python tuples cost far more memory than Arrow columns, so a large request is converted as it
    is read rather than at the end: memory stays near the Arrow size of the request.
    """

    CHUNK_SPANS = 8192

    def __init__(self) -> None:
        self.spans: list[tuple[Any, ...]] = []
        self.contexts: list[tuple[tuple[Any, ...], int]] = []  # (context values, index of its first span)
        # EVENT_TYPE's columns, filled in place by the protobuf loop (no per-event tuple to transpose)
        self.event_columns: tuple[list[Any], ...] = tuple([] for _ in EVENT_TYPE)
        self.event_offsets = [0]
        self.links: list[_Link] = []
        self.link_offsets = [0]
        self.tables: list[pa.Table] = []
        self.rejected = 0
        self.reasons: Counter[str] = Counter()

    def reject(self, reason: str) -> None:
        self.rejected += 1
        self.reasons[reason] += 1

    def add_context(self, values: tuple[Any, ...]) -> None:
        """Resource and scope values (in _CONTEXT_FIELDS order) of the spans added from now on."""
        self.contexts.append((values, len(self.spans)))

    def flush(self, received: int) -> None:
        """Moves the spans gathered so far into an Arrow table (the lists are emptied in place)."""
        if not self.spans:
            return
        self.tables.append(self._table(received))
        self.spans.clear()
        for column in self.event_columns:
            column.clear()
        self.links.clear()
        del self.event_offsets[1:], self.link_offsets[1:]
        self.contexts = [(self.contexts[-1][0], 0)]

    def to_result(self, received: int) -> DecodeResult:
        self.flush(received)
        if not self.tables:
            table = SEGMENT_SCHEMA.empty_table()
        elif len(self.tables) == 1:
            table = self.tables[0]
        else:
            table = pa.concat_tables(self.tables)
        return DecodeResult(table=table, rejected=self.rejected, reasons=self.reasons)

    def _table(self, received: int) -> pa.Table:
        n = len(self.spans)
        columns: dict[str, Any] = dict(zip(_SPAN_FIELDS, zip(*self.spans, strict=True), strict=True))
        columns.update(_context_columns(self.contexts, n, received))
        arrays = []
        for f in SEGMENT_SCHEMA:
            if f.name == "events":
                arrays.append(_list_array(self.event_columns, self.event_offsets, EVENT_TYPE))
            elif f.name == "links":
                link_columns = list(zip(*self.links, strict=True)) if self.links else [() for _ in LINK_TYPE]
                arrays.append(_list_array(link_columns, self.link_offsets, LINK_TYPE))
            else:
                column = columns[f.name]
                arrays.append(column if isinstance(column, pa.Array) else pa.array(column, f.type))
        return pa.Table.from_arrays(arrays, schema=SEGMENT_SCHEMA)


def _context_columns(
    contexts: list[tuple[tuple[Any, ...], int]], n: int, received: int
) -> dict[str, pa.Array]:
    """The resource, scope and receipt columns of `n` spans, from (context values, first span) runs."""
    starts = [start for _, start in contexts] + [n]
    runs = [(values, starts[i + 1] - start) for i, (values, start) in enumerate(contexts)]
    runs = [(values, count) for values, count in runs if count]
    # Resource, scope and receipt values repeat for a whole run of spans: Arrow copies them, which
    # is cheaper than converting the same Python object once per span. Many runs (an SDK batch
    # holds one per service) are one small array per column, taken by one shared index array.
    if len(runs) > 2:
        index = pa.array([i for i, (_, count) in enumerate(runs) for _ in range(count)], pa.int32())
        columns = {
            name: pa.array([values[i] for values, _ in runs], _TYPES[name]).take(index)
            for i, name in enumerate(_CONTEXT_FIELDS)
        }
    else:
        columns = {
            name: _runs_array([(values[i], count) for values, count in runs], _TYPES[name])
            for i, name in enumerate(_CONTEXT_FIELDS)
        }
    columns["received_unix_nano"] = _runs_array([(received, n)], _TYPES["received_unix_nano"])
    return columns


def _runs_array(runs: list[tuple[Any, int]], type_: pa.DataType) -> pa.Array:
    """An array of each value repeated its count of times, in order."""
    parts = [pa.repeat(pa.scalar(value, type_), count) for value, count in runs]
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _list_array(columns: Iterable[Sequence[Any]], offsets: list[int], struct: pa.StructType) -> pa.Array:
    fields = list(struct)
    children = [pa.array(column, f.type) for column, f in zip(columns, fields, strict=True)]
    values = pa.StructArray.from_arrays(children, fields=fields)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)


def _id_problem(name: str, value: bytes | str, size: int, *, optional: bool = False) -> str | None:
    """Why an id is invalid (OTLP: exact length, not all zero), or None."""
    if isinstance(value, str):
        return f"{name} {value}"
    if optional and not value:
        return None
    if len(value) != size:
        return f"{name} must be {size} bytes, got {len(value)}"
    if not any(value):
        return f"{name} is all zero"
    return None


def _time_problem(*values: int) -> str | None:
    for value in values:
        if not 0 <= value <= INT64_MAX:
            return "timestamp outside the int64 range"
    return None


def _resource_identity(read: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """service_name and node: service.instance.id names the node, else the service does."""
    service = _as_str(read.get(contract.SERVICE_NAME))
    return service, _as_str(read.get(contract.SERVICE_INSTANCE_ID)) or service


def _contract_values(kind_name: str, read: Mapping[str, Any]) -> tuple[Any, Any, Any, Any]:
    """span_session_id, span_turn_id, layer and hlc from the attributes the collector reads."""
    if not read:
        return None, None, None, None
    session = read.get(contract.SESSION_ID)
    if session is None:
        session = read.get(contract.GEN_AI_CONVERSATION_ID)
    turn = read.get(contract.TURN_ID)
    layer = read.get(contract.LAYER)
    hlc = read.get(contract.HLC)
    return (
        session if session is None or type(session) is str else str(session),
        turn if turn is None or type(turn) is str else str(turn),
        layer if type(layer) is str and layer else contract.infer_layer(kind_name, read),
        hlc if type(hlc) is int and -INT64_MAX - 1 <= hlc <= INT64_MAX else _as_int(hlc),
    )


def _kind_name(kind: int) -> str:
    return SPAN_KINDS[kind] if 0 <= kind < len(SPAN_KINDS) else "unspecified"


def _status_name(code: int) -> str:
    return STATUS_CODES[code] if 0 <= code < len(STATUS_CODES) else "unset"


# --- protobuf -----------------------------------------------------------------------------------


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
    columns.update(_context_columns(walk.contexts, n, received))
    return pa.Table.from_arrays([columns[f.name] for f in SEGMENT_SCHEMA], schema=SEGMENT_SCHEMA)


def _cached_kv_entry(raw: bytes) -> _Entry:
    return _kv_cache.get(raw) or _kv_entry(raw)


def _span_problem(trace_id: bytes, span_id: bytes, parent: bytes, start: int, end: int) -> str:
    return (
        _id_problem("trace_id", trace_id, 16) or _id_problem("span_id", span_id, 8)
        or _id_problem("parent_span_id", parent, 8, optional=True)
        or _time_problem(start, end) or "invalid span"
    )


def _link_problem(trace_id: bytes, span_id: bytes) -> str:
    return _id_problem("link trace_id", trace_id, 16) or _id_problem("link span_id", span_id, 8) or ""


def _resource_values(raws: list[bytes]) -> tuple[str, str | None, str | None]:
    """A resource's attributes JSON, service name and node."""
    resource_json, read = _raw_attributes(raws)
    return (resource_json, *_resource_identity(read))


def _context(
    resource: tuple[str, str | None, str | None], resource_dropped: int, resource_schema_url: str,
    scope_name: str, scope_version: str, scope_raws: list[bytes], scope_dropped: int, scope_schema_url: str,
) -> tuple[Any, ...]:
    """The _CONTEXT_FIELDS values of a run of spans, as decode_protobuf_reference makes them."""
    resource_json, service, node = resource
    return (
        resource_json, resource_dropped, resource_schema_url or None, scope_name or None,
        scope_version or None, _raw_attributes(scope_raws)[0], scope_dropped, scope_schema_url or None,
        service, node,
    )


_WIRE_HOOKS: Final = (
    _cached_kv_entry, _contract_values, _as_int, _span_problem, _link_problem, _resource_values, _context,
)
if frozenset(_otlp_wire.READ_KEYS) != _READ_KEYS:
    raise ImportError("_otlp_wire.READ_KEYS differs from otlp_decode._READ_KEYS: rebuild it")


def decode_protobuf_reference(body: bytes, *, received_unix_nano: int | None = None) -> DecodeResult:
    """The pure-Python decode of an ExportTraceServiceRequest: the rows the compiled walker must equal."""
    try:
        request = RawRequest.FromString(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"not a protobuf ExportTraceServiceRequest: {exc}") from None
    received = received_unix_nano if received_unix_nano is not None else time.time_ns()
    rows = _Rows()
    for resource_spans in request.resource_spans:
        resource = resource_spans.resource
        resource_json, resource_read = _raw_attributes(resource.attributes)
        service, node = _resource_identity(resource_read)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            context = (
                resource_json, resource.dropped_attributes_count, resource_spans.schema_url or None,
                scope.name or None, scope.version or None, _raw_attributes(scope.attributes)[0],
                scope.dropped_attributes_count, scope_spans.schema_url or None, service, node,
            )
            rows.add_context(context)
            _add_protobuf_spans(rows, scope_spans.spans, received)
    return rows.to_result(received)


def _add_protobuf_spans(rows: _Rows, spans: Iterable[Any], received: int) -> None:
    """The hot loop: one tuple per span, attributes through the KeyValue cache."""
    get = _kv_cache.get
    add_span, add_link = rows.spans.append, rows.links.append
    event_offsets, link_offsets = rows.event_offsets, rows.link_offsets
    event_columns = rows.event_columns
    event_times, event_names, event_attributes, event_dropped, event_hlcs = event_columns
    add_event_time, add_event_name = event_times.append, event_names.append
    add_event_attributes, add_event_dropped = event_attributes.append, event_dropped.append
    add_event_hlc = event_hlcs.append
    hlc_key = contract.HLC
    zero_trace, zero_span = bytes(16), bytes(8)
    chunk = rows.CHUNK_SPANS
    for span in spans:
        if len(rows.spans) >= chunk:
            rows.flush(received)
        trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
        start, end = span.start_time_unix_nano, span.end_time_unix_nano
        if (
            len(trace_id) != 16 or len(span_id) != 8 or (parent and len(parent) != 8)
            or end > INT64_MAX or start > INT64_MAX or trace_id == zero_trace or span_id == zero_span
        ):
            rows.reject(
                _id_problem("trace_id", trace_id, 16) or _id_problem("span_id", span_id, 8)
                or _id_problem("parent_span_id", parent, 8, optional=True)
                or _time_problem(start, end) or "invalid span"
            )
            continue
        links = span.links
        if links:
            problem = None
            for link in links:
                problem = problem or _id_problem("link trace_id", link.trace_id, 16) or _id_problem(
                    "link span_id", link.span_id, 8
                )
            if problem:
                rows.reject(problem)
                continue
        before = len(event_times)
        latest_event = 0
        for event in span.events:
            entries = [get(raw) or _kv_entry(raw) for raw in event.attributes]
            hlc = None
            if entries:
                add_event_attributes("{" + ",".join(map(_first, entries)) + "}")
                reads = [entry[1] for entry in entries if entry[1] is not None]
                if reads:
                    hlc = _as_int(dict(reads).get(hlc_key))
            else:
                add_event_attributes("{}")
            event_time = event.time_unix_nano
            latest_event = event_time if event_time > latest_event else latest_event
            add_event_time(event_time)
            add_event_name(event.name)
            add_event_dropped(event.dropped_attributes_count)
            add_event_hlc(hlc)
        if latest_event > INT64_MAX:
            for column in event_columns:
                del column[before:]
            rows.reject("event timestamp outside the int64 range")
            continue
        entries = [get(raw) or _kv_entry(raw) for raw in span.attributes]
        if entries:
            attributes = "{" + ",".join(map(_first, entries)) + "}"
            read = dict([entry[1] for entry in entries if entry[1] is not None])
        else:
            attributes, read = "{}", {}
        kind_name = _kind_name(span.kind)
        status = span.status
        add_span(
            (
                trace_id.hex(), span_id.hex(), parent.hex() or None, span.trace_state or None,
                span.flags, span.name, kind_name, start, end or None, attributes,
                span.dropped_attributes_count, span.dropped_events_count, span.dropped_links_count,
                _status_name(status.code), status.message or None,
                *_contract_values(kind_name, read),
            )
        )
        event_offsets.append(len(event_times))
        for link in links:
            add_link(
                (
                    link.trace_id.hex(), link.span_id.hex(), link.trace_state or None,
                    _raw_attributes(link.attributes)[0], link.dropped_attributes_count, link.flags,
                )
            )
        link_offsets.append(link_offsets[-1] + len(links))


# --- OTLP/JSON ----------------------------------------------------------------------------------
# OTLP/JSON is protobuf's JSON mapping with three exceptions (hex ids, integer enums, lowerCamelCase
# keys only); receivers must ignore unknown fields. protobuf's json_format reads ids as base64, so
# the dict orjson returns is walked here. Snake_case keys are accepted too, as the JSON mapping does.


def _get(obj: Mapping[str, Any], camel: str, snake: str | None = None, default: Any = None) -> Any:
    value = obj.get(camel)
    if value is None and snake is not None:
        value = obj.get(snake)
    return default if value is None else value


def _json_int(value: Any, what: str) -> int:
    """A JSON 64-bit integer: OTLP sends them as strings or numbers."""
    if isinstance(value, bool):
        raise OtlpDecodeError(f"{what} must be an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise OtlpDecodeError(f"{what} must be an integer, got {value!r}") from None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise OtlpDecodeError(f"{what} must be an integer, got {value!r}")


def _json_enum(value: Any, names: tuple[str, ...], prefix: str, what: str) -> int:
    """OTLP/JSON enums are integers; the enum's name (SPAN_KIND_SERVER) is accepted as well."""
    if isinstance(value, str) and not value.lstrip("-").isdigit():
        short = value.removeprefix(prefix).lower()
        if short in names:
            return names.index(short)
        raise OtlpDecodeError(f"{what}: unknown value {value!r}")
    return _json_int(value, what)


def _json_hex_id(value: Any) -> bytes | str:
    """The id's bytes, or why it cannot be one (OTLP/JSON ids are hex strings)."""
    if value is None or value == "":
        return b""
    if not isinstance(value, str):
        return "is not a hex string"
    try:
        return bytes.fromhex(value)
    except ValueError:
        return "is not a hex string"


def _hex(value: bytes | str) -> str:
    """Lower-case hex of a checked id (a problem string never gets this far: its span is rejected)."""
    return value.hex() if isinstance(value, bytes) else ""


def _json_value(value: Any) -> Any:
    """An OTLP/JSON AnyValue object as a JSON-ready Python value."""
    if not isinstance(value, Mapping):
        return None
    for key, item in value.items():
        if key in ("stringValue", "string_value"):
            return item
        if key in ("boolValue", "bool_value"):
            return bool(item)
        if key in ("intValue", "int_value"):
            return _json_int(item, "intValue")
        if key in ("doubleValue", "double_value"):
            return float(item) if not isinstance(item, str) else _json_double(item)
        if key in ("arrayValue", "array_value"):
            return [_json_value(v) for v in _get(item or {}, "values", default=[])]
        if key in ("kvlistValue", "kvlist_value"):
            return _json_attributes(_get(item or {}, "values", default=[]))
        if key in ("bytesValue", "bytes_value"):
            try:
                return base64.b64encode(base64.b64decode(item, validate=True)).decode()
            except (binascii.Error, TypeError):
                raise OtlpDecodeError(f"bytesValue must be base64, got {item!r}") from None
    return None


def _json_double(text: str) -> float | None:
    """JSON mapping: doubles may be strings, including "NaN" and "Infinity" (stored as null)."""
    try:
        number = float(text)
    except ValueError:
        raise OtlpDecodeError(f"doubleValue must be a number, got {text!r}") from None
    return None if math.isnan(number) or math.isinf(number) else number


def _json_attributes(items: Any) -> dict[str, Any]:
    if not isinstance(items, list):
        raise OtlpDecodeError("attributes must be a list of {key, value} objects")
    result = {}
    for kv in items:
        if not isinstance(kv, Mapping) or not isinstance(kv.get("key"), str):
            raise OtlpDecodeError("attributes must be a list of {key, value} objects")
        result[kv["key"]] = _json_value(kv.get("value"))
    return result


def decode_json(body: bytes | str, *, received_unix_nano: int | None = None) -> DecodeResult:
    """Decodes an OTLP/JSON ExportTraceServiceRequest; raises OtlpDecodeError if it is not one."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError(f"not JSON: {exc}") from None
    return decode_json_document(document, received_unix_nano=received_unix_nano)


def decode_json_document(document: Any, *, received_unix_nano: int | None = None) -> DecodeResult:
    """Decodes an already parsed OTLP/JSON request (one line of a file exporter's output)."""
    if not isinstance(document, Mapping):
        raise OtlpDecodeError("an OTLP/JSON request is an object with resourceSpans")
    received = received_unix_nano if received_unix_nano is not None else time.time_ns()
    rows = _Rows()
    try:
        for resource_spans in _list(_get(document, "resourceSpans", "resource_spans", [])):
            _add_json_resource(rows, resource_spans, received)
    except OtlpDecodeError:
        raise
    except (TypeError, AttributeError, ValueError, RecursionError) as exc:
        raise OtlpDecodeError(f"malformed OTLP/JSON: {exc}") from None
    return rows.to_result(received)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise OtlpDecodeError(f"expected a list, got {type(value).__name__}")
    return value


def _dropped(obj: Mapping[str, Any], field: str = "droppedAttributesCount") -> int:
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in field)
    return _json_int(_get(obj, field, snake, 0), field)


def _add_json_resource(rows: _Rows, resource_spans: Mapping[str, Any], received: int) -> None:
    resource = _get(resource_spans, "resource", default={})
    resource_attributes = _json_attributes(_get(resource, "attributes", default=[]))
    service, node = _resource_identity(resource_attributes)
    resource_json = _dumps(resource_attributes)
    for scope_spans in _list(_get(resource_spans, "scopeSpans", "scope_spans", [])):
        scope = _get(scope_spans, "scope", default={})
        context = (
            resource_json, _dropped(resource), _get(resource_spans, "schemaUrl", "schema_url") or None,
            _get(scope, "name") or None, _get(scope, "version") or None,
            _dumps(_json_attributes(_get(scope, "attributes", default=[]))), _dropped(scope),
            _get(scope_spans, "schemaUrl", "schema_url") or None, service, node,
        )
        rows.add_context(context)
        for span in _list(_get(scope_spans, "spans", default=[])):
            if len(rows.spans) >= rows.CHUNK_SPANS:
                rows.flush(received)
            _add_json_span(rows, span)


def _add_json_span(rows: _Rows, span: Mapping[str, Any]) -> None:
    trace_id = _json_hex_id(_get(span, "traceId", "trace_id"))
    span_id = _json_hex_id(_get(span, "spanId", "span_id"))
    parent = _json_hex_id(_get(span, "parentSpanId", "parent_span_id"))
    start = _json_int(_get(span, "startTimeUnixNano", "start_time_unix_nano", 0), "startTimeUnixNano")
    end = _json_int(_get(span, "endTimeUnixNano", "end_time_unix_nano", 0), "endTimeUnixNano")
    problem = (
        _id_problem("trace_id", trace_id, 16)
        or _id_problem("span_id", span_id, 8)
        or _id_problem("parent_span_id", parent, 8, optional=True)
        or _time_problem(start, end)
    )
    events: list[_Event] = []
    for event in _list(_get(span, "events", default=[])):
        event_attributes = _json_attributes(_get(event, "attributes", default=[]))
        event_time = _json_int(_get(event, "timeUnixNano", "time_unix_nano", 0), "timeUnixNano")
        problem = problem or _time_problem(event_time)
        events.append(
            (event_time, _get(event, "name", default=""), _dumps(event_attributes), _dropped(event),
             _as_int(event_attributes.get(contract.HLC)))
        )
    links: list[_Link] = []
    for link in _list(_get(span, "links", default=[])):
        link_trace = _json_hex_id(_get(link, "traceId", "trace_id"))
        link_span = _json_hex_id(_get(link, "spanId", "span_id"))
        problem = (
            problem
            or _id_problem("link trace_id", link_trace, 16)
            or _id_problem("link span_id", link_span, 8)
        )
        links.append(
            (_hex(link_trace), _hex(link_span), _get(link, "traceState", "trace_state") or None,
             _dumps(_json_attributes(_get(link, "attributes", default=[]))), _dropped(link),
             _json_int(_get(link, "flags", default=0), "flags"))
        )
    if problem:
        rows.reject(problem)
        return
    attributes = _json_attributes(_get(span, "attributes", default=[]))
    status = _get(span, "status", default={})
    kind_name = _kind_name(_json_enum(_get(span, "kind", default=0), SPAN_KINDS, "SPAN_KIND_", "kind"))
    read = {key: value for key, value in attributes.items() if key in _READ_KEYS}
    rows.spans.append(
        (
            _hex(trace_id), _hex(span_id), _hex(parent) or None,
            _get(span, "traceState", "trace_state") or None,
            _json_int(_get(span, "flags", default=0), "flags"), _get(span, "name", default=""), kind_name,
            start, end or None, _dumps(attributes), _dropped(span),
            _dropped(span, "droppedEventsCount"), _dropped(span, "droppedLinksCount"),
            _status_name(_json_enum(_get(status, "code", default=0), STATUS_CODES, "STATUS_CODE_", "code")),
            _get(status, "message") or None,
            *_contract_values(kind_name, read),
        )
    )
    if events:
        for column, values in zip(rows.event_columns, zip(*events, strict=True), strict=True):
            column += values
    rows.event_offsets.append(rows.event_offsets[-1] + len(events))
    rows.links += links
    rows.link_offsets.append(rows.link_offsets[-1] + len(links))
