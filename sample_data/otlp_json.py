"""OTLP/JSON encoding of an ExportTraceServiceRequest, as the OpenTelemetry Collector's file exporter
writes it: hex trace and span ids, 64-bit integers as strings, enums as integers, lowerCamelCase keys.

protobuf's `json_format` is not OTLP/JSON (it writes ids as base64), hence this walk of the message.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope
from opentelemetry.proto.trace.v1.trace_pb2 import Span


def any_value(value: AnyValue) -> dict[str, Any]:
    which = value.WhichOneof("value")
    if which == "string_value":
        return {"stringValue": value.string_value}
    if which == "bool_value":
        return {"boolValue": value.bool_value}
    if which == "int_value":
        return {"intValue": str(value.int_value)}
    if which == "double_value":
        return {"doubleValue": value.double_value}
    if which == "array_value":
        return {"arrayValue": {"values": [any_value(v) for v in value.array_value.values]}}
    if which == "kvlist_value":
        return {"kvlistValue": {"values": attributes(value.kvlist_value.values)}}
    if which == "bytes_value":
        return {"bytesValue": base64.b64encode(value.bytes_value).decode()}
    return {}


def attributes(kvs: Any) -> list[dict[str, Any]]:
    return [{"key": kv.key, "value": any_value(kv.value)} for kv in kvs]


def _scope(scope: InstrumentationScope) -> dict[str, Any]:
    out: dict[str, Any] = {"name": scope.name}
    if scope.version:
        out["version"] = scope.version
    if scope.attributes:
        out["attributes"] = attributes(scope.attributes)
    return out


def span(s: Span) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": s.trace_id.hex(),
        "spanId": s.span_id.hex(),
        "name": s.name,
        "kind": s.kind,
        "startTimeUnixNano": str(s.start_time_unix_nano),
        "endTimeUnixNano": str(s.end_time_unix_nano),
        "attributes": attributes(s.attributes),
    }
    if s.parent_span_id:
        out["parentSpanId"] = s.parent_span_id.hex()
    if s.trace_state:
        out["traceState"] = s.trace_state
    if s.flags:
        out["flags"] = s.flags
    if s.dropped_attributes_count:
        out["droppedAttributesCount"] = s.dropped_attributes_count
    if s.events:
        out["events"] = [
            {
                "timeUnixNano": str(e.time_unix_nano),
                "name": e.name,
                "attributes": attributes(e.attributes),
                **(
                    {"droppedAttributesCount": e.dropped_attributes_count}
                    if e.dropped_attributes_count
                    else {}
                ),
            }
            for e in s.events
        ]
    if s.dropped_events_count:
        out["droppedEventsCount"] = s.dropped_events_count
    if s.links:
        out["links"] = [
            {
                "traceId": link.trace_id.hex(),
                "spanId": link.span_id.hex(),
                "attributes": attributes(link.attributes),
                **({"traceState": link.trace_state} if link.trace_state else {}),
                **({"flags": link.flags} if link.flags else {}),
            }
            for link in s.links
        ]
    if s.dropped_links_count:
        out["droppedLinksCount"] = s.dropped_links_count
    status: dict[str, Any] = {}
    if s.status.code:
        status["code"] = s.status.code
    if s.status.message:
        status["message"] = s.status.message
    out["status"] = status
    return out


def request_to_dict(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """The OTLP/JSON object of an export request."""
    resource_spans = []
    for rs in request.resource_spans:
        scope_spans = []
        for ss in rs.scope_spans:
            entry: dict[str, Any] = {"scope": _scope(ss.scope), "spans": [span(s) for s in ss.spans]}
            if ss.schema_url:
                entry["schemaUrl"] = ss.schema_url
            scope_spans.append(entry)
        resource: dict[str, Any] = {"attributes": attributes(rs.resource.attributes)}
        item: dict[str, Any] = {"resource": resource, "scopeSpans": scope_spans}
        if rs.schema_url:
            item["schemaUrl"] = rs.schema_url
        resource_spans.append(item)
    return {"resourceSpans": resource_spans}


def encode_line(request: ExportTraceServiceRequest) -> bytes:
    """One line of OTLP JSON Lines (the Collector file exporter's format), newline included."""
    return orjson.dumps(request_to_dict(request)) + b"\n"
