"""OTLP trace requests built from Python values: attributes of any AnyValue kind, and the request as the
OTLP/JSON a file import or an HTTP client sends (protobuf's JSON mapping, with hex trace and span ids).

What the collector's tests and the fuzzing benchmark (bench/fuzz.py) build their requests with.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList


def kv(key: str, value: Any) -> KeyValue:
    """A KeyValue of any AnyValue kind: str, bool, int, float, bytes, list, dict, None."""
    return KeyValue(key=key, value=any_value(value))


def any_value(value: Any) -> AnyValue:
    """The AnyValue of a Python value (None: the empty AnyValue)."""
    if value is None:
        return AnyValue()
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[any_value(v) for v in value]))
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=[kv(k, v) for k, v in value.items()]))
    return AnyValue(string_value=str(value))


_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON: protobuf's JSON mapping with hex ids and integer enums."""

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: base64.b64decode(value).hex() if key in _ID_KEYS else fix(value)
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [fix(item) for item in node]
        return node

    return dict(fix(MessageToDict(request, use_integers_for_enums=True)))
