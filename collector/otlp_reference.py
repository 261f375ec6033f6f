"""The pure-Python decoder of OTLP protobuf trace requests: the readable statement of the rules.

The compiled walker (otlp_decode) must give exactly its rows, and a request the walker finds
malformed is decoded here, which raises the error that explains it. It parses with a wire-compatible
copy of the OTLP messages whose attribute lists are raw bytes, converted through otlp_attributes'
cache.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Final

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from turnlens.collector.otlp_attributes import (
    check_attributes,
    fragment_of,
    kv_cache,
    kv_entry,
    raw_attributes,
)
from turnlens.collector.otlp_rows import (
    INT64_MAX,
    DecodeResult,
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


def decode_protobuf_reference(body: bytes, *, received_unix_nano: int | None = None) -> DecodeResult:
    """The pure-Python decode of an ExportTraceServiceRequest: the rows the compiled walker must equal."""
    try:
        request = RawRequest.FromString(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"not a protobuf ExportTraceServiceRequest: {exc}") from None
    received = received_unix_nano if received_unix_nano is not None else time.time_ns()
    rows = Rows()
    for resource_spans in request.resource_spans:
        resource = resource_spans.resource
        resource_json, resource_read = raw_attributes(resource.attributes)
        service, node = resource_identity(resource_read)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            context = (
                resource_json, resource.dropped_attributes_count, resource_spans.schema_url or None,
                scope.name or None, scope.version or None, raw_attributes(scope.attributes)[0],
                scope.dropped_attributes_count, scope_spans.schema_url or None, service, node,
            )
            rows.add_context(context)
            _add_protobuf_spans(rows, scope_spans.spans, received)
    return rows.to_result(received)


def _add_protobuf_spans(rows: Rows, spans: Iterable[Any], received: int) -> None:
    """The hot loop: one tuple per span, attributes through the KeyValue cache."""
    get = kv_cache.get
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
            check_attributes(_all_attributes(span))
            rows.reject(
                id_problem("trace_id", trace_id, 16) or id_problem("span_id", span_id, 8)
                or id_problem("parent_span_id", parent, 8, optional=True)
                or time_problem(start, end) or "invalid span"
            )
            continue
        links = span.links
        if links:
            problem = None
            for link in links:
                problem = problem or id_problem("link trace_id", link.trace_id, 16) or id_problem(
                    "link span_id", link.span_id, 8
                )
            if problem:
                check_attributes(_all_attributes(span))
                rows.reject(problem)
                continue
        before = len(event_times)
        latest_event = 0
        for event in span.events:
            entries = [get(raw) or kv_entry(raw) for raw in event.attributes]
            hlc = None
            if entries:
                add_event_attributes("{" + ",".join(map(fragment_of, entries)) + "}")
                reads = [entry[1] for entry in entries if entry[1] is not None]
                if reads:
                    hlc = as_int(dict(reads).get(hlc_key))
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
            check_attributes(_all_attributes(span))
            rows.reject("event timestamp outside the int64 range")
            continue
        entries = [get(raw) or kv_entry(raw) for raw in span.attributes]
        if entries:
            attributes = "{" + ",".join(map(fragment_of, entries)) + "}"
            read = dict([entry[1] for entry in entries if entry[1] is not None])
        else:
            attributes, read = "{}", {}
        kind_name = span_kind_name(span.kind)
        status = span.status
        add_span(
            (
                trace_id.hex(), span_id.hex(), parent.hex() or None, span.trace_state or None,
                span.flags, span.name, kind_name, start, end or None, attributes,
                span.dropped_attributes_count, span.dropped_events_count, span.dropped_links_count,
                status_code_name(status.code), status.message or None,
                *contract_values(kind_name, read),
            )
        )
        event_offsets.append(len(event_times))
        for link in links:
            add_link(
                (
                    link.trace_id.hex(), link.span_id.hex(), link.trace_state or None,
                    raw_attributes(link.attributes)[0], link.dropped_attributes_count, link.flags,
                )
            )
        link_offsets.append(link_offsets[-1] + len(links))


def _all_attributes(span: Any) -> list[bytes]:
    """A span's serialized KeyValues: its own, then each event's, then each link's (the walker's order)."""
    raws = list(span.attributes)
    for event in span.events:
        raws += event.attributes
    for link in span.links:
        raws += link.attributes
    return raws
