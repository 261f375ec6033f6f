"""What every OTLP trace decoder shares: the result and its error, the span rules, the Arrow table builder.

The compiled walker (otlp_decode), the pure-Python reference (otlp_reference) and the OTLP/JSON
decoder (otlp_json) must produce the same rows and reject spans for the same reasons, so the rules
(id and time checks, the contract's columns) and the SEGMENT_SCHEMA table live here once.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
from turnlens.kernel import contract
from turnlens.kernel.schema import EVENT_TYPE, LINK_TYPE, SEGMENT_SCHEMA

SPAN_KINDS: Final = ("unspecified", "internal", "server", "client", "producer", "consumer")
STATUS_CODES: Final = ("unset", "ok", "error")
INT64_MAX: Final = (1 << 63) - 1

# Attribute keys whose values the collector reads (everything else is only serialized): the
# contract's columns, and what contract.infer_layer looks at.
READ_KEYS: Final = frozenset(
    {
        contract.SERVICE_NAME, contract.SERVICE_INSTANCE_ID, contract.SESSION_ID,
        contract.GEN_AI_CONVERSATION_ID, contract.TURN_ID, contract.LAYER, contract.HLC,
        contract.GEN_AI_OPERATION_NAME, contract.OPENINFERENCE_SPAN_KIND, contract.SERVER_ADDRESS,
        contract.PEER_SERVICE, contract.HTTP_REQUEST_METHOD, contract.HTTP_METHOD_OLD,
    }
)


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


def as_int(value: Any) -> int | None:
    """An integer attribute, also from its string form (JSON exporters and some SDKs send those)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -INT64_MAX - 1 <= value <= INT64_MAX else None
    if isinstance(value, str):
        try:
            return as_int(int(value))
        except ValueError:
            return None
    if isinstance(value, float) and value.is_integer() and not math.isinf(value):
        return as_int(int(value))
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
Event = tuple[int, str, str | bytes, int, int | None]  # attributes: str, or orjson bytes from OTLP/JSON
# (trace_id, span_id, trace_state, attributes, dropped_attributes_count, flags), LINK_TYPE's order
Link = tuple[str, str, str | None, str | bytes, int, int]


class Rows:
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
        self.links: list[Link] = []
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
        columns.update(context_columns(self.contexts, n, received))
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


def context_columns(
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


def id_problem(name: str, value: bytes | str, size: int, *, optional: bool = False) -> str | None:
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


def time_problem(*values: int) -> str | None:
    for value in values:
        if not 0 <= value <= INT64_MAX:
            return "timestamp outside the int64 range"
    return None


def resource_identity(read: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """service_name and node: service.instance.id names the node, else the service does."""
    service = _as_str(read.get(contract.SERVICE_NAME))
    return service, _as_str(read.get(contract.SERVICE_INSTANCE_ID)) or service


def contract_values(kind_name: str, read: Mapping[str, Any]) -> tuple[Any, Any, Any, Any]:
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
        hlc if type(hlc) is int and -INT64_MAX - 1 <= hlc <= INT64_MAX else as_int(hlc),
    )


def span_kind_name(kind: int) -> str:
    return SPAN_KINDS[kind] if 0 <= kind < len(SPAN_KINDS) else "unspecified"


def status_code_name(code: int) -> str:
    return STATUS_CODES[code] if 0 <= code < len(STATUS_CODES) else "unset"

