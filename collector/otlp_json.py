"""The OTLP/JSON decoder: an ExportTraceServiceRequest in protobuf's JSON mapping → SEGMENT_SCHEMA rows.

OTLP/JSON is protobuf's JSON mapping with three exceptions (hex ids, integer enums, lowerCamelCase
keys only); receivers must ignore unknown fields. protobuf's json_format reads ids as base64, so the
dict orjson returns is walked here. Snake_case keys are accepted too, as the JSON mapping does.
"""

from __future__ import annotations

import base64
import binascii
import math
import time
from collections.abc import Mapping
from typing import Any

import orjson
from turnlens.collector.otlp_rows import (
    READ_KEYS,
    SPAN_KINDS,
    STATUS_CODES,
    DecodeResult,
    Event,
    Link,
    OtlpDecodeError,
    Rows,
    as_int,
    contract_values,
    id_problem,
    resource_identity,
    span_kind_name,
    status_code_name,
    time_problem,
)
from turnlens.kernel import contract

_dumps = orjson.dumps
UINT32_MAX = (1 << 32) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


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


def _json_uint32(value: Any, what: str) -> int:
    """A flags field or a dropped count: protobuf's fixed32 / uint32."""
    number = _json_int(value, what)
    if not 0 <= number <= UINT32_MAX:
        raise OtlpDecodeError(f"{what} must be between 0 and {UINT32_MAX}, got {number}")
    return number


def _text(obj: Mapping[str, Any], camel: str, snake: str | None, what: str) -> str:
    """A string field ("" when absent); any other JSON type is refused, naming the field."""
    value = _get(obj, camel, snake, "")
    if not isinstance(value, str):
        raise OtlpDecodeError(f"{what} must be a string, got {_type_name(value)}")
    return value


def _object(value: Any, what: str) -> Mapping[str, Any]:
    """A JSON object field ({} when absent)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OtlpDecodeError(f"{what} must be an object, got {_type_name(value)}")
    return value


def _type_name(value: Any) -> str:
    """The JSON name of a parsed value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


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
            if not isinstance(item, str):
                raise OtlpDecodeError(f"stringValue must be a string, got {_type_name(item)}")
            return item
        if key in ("boolValue", "bool_value"):
            if not isinstance(item, bool):
                raise OtlpDecodeError(f"boolValue must be true or false, got {_type_name(item)}")
            return item
        if key in ("intValue", "int_value"):
            number = _json_int(item, "intValue")
            if not INT64_MIN <= number <= INT64_MAX:
                raise OtlpDecodeError(f"intValue must be a 64-bit integer, got {number}")
            return number
        if key in ("doubleValue", "double_value"):
            if isinstance(item, str):
                return _json_double(item)
            if isinstance(item, bool) or not isinstance(item, int | float):
                raise OtlpDecodeError(f"doubleValue must be a number, got {_type_name(item)}")
            return float(item)
        if key in ("arrayValue", "array_value"):
            values = _get(_object(item, "arrayValue"), "values", default=[])
            return [_json_value(v) for v in _list(values, "arrayValue.values")]
        if key in ("kvlistValue", "kvlist_value"):
            return _json_attributes(_get(_object(item, "kvlistValue"), "values", default=[]))
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
    rows = Rows()
    try:
        for resource_spans in _list(_get(document, "resourceSpans", "resource_spans", []), "resourceSpans"):
            _add_json_resource(rows, _object(resource_spans, "resourceSpans[]"), received)
    except OtlpDecodeError:
        raise
    except (TypeError, AttributeError, ValueError, RecursionError) as exc:
        raise OtlpDecodeError(f"malformed OTLP/JSON: {exc}") from None
    return rows.to_result(received)


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise OtlpDecodeError(f"{what} must be an array, got {_type_name(value)}")
    return value


def _dropped(obj: Mapping[str, Any], field: str = "droppedAttributesCount") -> int:
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in field)
    return _json_uint32(_get(obj, field, snake, 0), field)


def _add_json_resource(rows: Rows, resource_spans: Mapping[str, Any], received: int) -> None:
    resource = _object(_get(resource_spans, "resource"), "resource")
    resource_attributes = _json_attributes(_get(resource, "attributes", default=[]))
    service, node = resource_identity(resource_attributes)
    resource_json = _dumps(resource_attributes)
    resource_schema_url = _text(resource_spans, "schemaUrl", "schema_url", "resourceSpans.schemaUrl")
    for scope_spans in _list(_get(resource_spans, "scopeSpans", "scope_spans", []), "scopeSpans"):
        scope_spans = _object(scope_spans, "scopeSpans[]")
        scope = _object(_get(scope_spans, "scope"), "scope")
        context = (
            resource_json, _dropped(resource), resource_schema_url or None,
            _text(scope, "name", None, "scope.name") or None,
            _text(scope, "version", None, "scope.version") or None,
            _dumps(_json_attributes(_get(scope, "attributes", default=[]))), _dropped(scope),
            _text(scope_spans, "schemaUrl", "schema_url", "scopeSpans.schemaUrl") or None, service, node,
        )
        rows.add_context(context)
        for span in _list(_get(scope_spans, "spans", default=[]), "spans"):
            if len(rows.spans) >= rows.CHUNK_SPANS:
                rows.flush(received)
            _add_json_span(rows, _object(span, "spans[]"))


def _add_json_span(rows: Rows, span: Mapping[str, Any]) -> None:
    trace_id = _json_hex_id(_get(span, "traceId", "trace_id"))
    span_id = _json_hex_id(_get(span, "spanId", "span_id"))
    parent = _json_hex_id(_get(span, "parentSpanId", "parent_span_id"))
    start = _json_int(_get(span, "startTimeUnixNano", "start_time_unix_nano", 0), "startTimeUnixNano")
    end = _json_int(_get(span, "endTimeUnixNano", "end_time_unix_nano", 0), "endTimeUnixNano")
    problem = (
        id_problem("trace_id", trace_id, 16)
        or id_problem("span_id", span_id, 8)
        or id_problem("parent_span_id", parent, 8, optional=True)
        or time_problem(start, end)
    )
    events: list[Event] = []
    for event in _list(_get(span, "events", default=[]), "events"):
        event = _object(event, "events[]")
        event_attributes = _json_attributes(_get(event, "attributes", default=[]))
        event_time = _json_int(_get(event, "timeUnixNano", "time_unix_nano", 0), "timeUnixNano")
        problem = problem or time_problem(event_time)
        events.append(
            (event_time, _text(event, "name", None, "event name"), _dumps(event_attributes), _dropped(event),
             as_int(event_attributes.get(contract.HLC)))
        )
    links: list[Link] = []
    for link in _list(_get(span, "links", default=[]), "links"):
        link = _object(link, "links[]")
        link_trace = _json_hex_id(_get(link, "traceId", "trace_id"))
        link_span = _json_hex_id(_get(link, "spanId", "span_id"))
        problem = (
            problem
            or id_problem("link trace_id", link_trace, 16)
            or id_problem("link span_id", link_span, 8)
        )
        links.append(
            (_hex(link_trace), _hex(link_span),
             _text(link, "traceState", "trace_state", "link traceState") or None,
             _dumps(_json_attributes(_get(link, "attributes", default=[]))), _dropped(link),
             _json_uint32(_get(link, "flags", default=0), "link flags"))
        )
    if problem:
        rows.reject(problem)
        return
    attributes = _json_attributes(_get(span, "attributes", default=[]))
    status = _object(_get(span, "status"), "status")
    kind_name = span_kind_name(_json_enum(_get(span, "kind", default=0), SPAN_KINDS, "SPAN_KIND_", "kind"))
    read = {key: value for key, value in attributes.items() if key in READ_KEYS}
    rows.spans.append(
        (
            _hex(trace_id), _hex(span_id), _hex(parent) or None,
            _text(span, "traceState", "trace_state", "traceState") or None,
            _json_uint32(_get(span, "flags", default=0), "flags"), _text(span, "name", None, "name"),
            kind_name,
            start, end or None, _dumps(attributes), _dropped(span),
            _dropped(span, "droppedEventsCount"), _dropped(span, "droppedLinksCount"),
            status_code_name(
                _json_enum(_get(status, "code", default=0), STATUS_CODES, "STATUS_CODE_", "code")
            ),
            _text(status, "message", None, "status.message") or None,
            *contract_values(kind_name, read),
        )
    )
    if events:
        for column, values in zip(rows.event_columns, zip(*events, strict=True), strict=True):
            column += values
    rows.event_offsets.append(rows.event_offsets[-1] + len(events))
    rows.links += links
    rows.link_offsets.append(rows.link_offsets[-1] + len(links))
