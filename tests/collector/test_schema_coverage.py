"""Every field of the OTLP trace protobuf has a place in SEGMENT_SCHEMA, or a stated reason not to.

When opentelemetry-proto grows a field, this fails until the schema (or UNSTORED_OTLP_FIELDS) says
where it goes.
"""

from __future__ import annotations

import otlp_samples as s
import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans
from turnlens.kernel.schema import SEGMENT_SCHEMA, UNSTORED_OTLP_FIELDS

ATTRIBUTE_COLUMNS = ("attributes", "resource_attributes", "scope_attributes", "events.attributes",
                     "links.attributes")

# "Message.field" → the column (or struct child) that holds it.
WHERE = {
    "ResourceSpans.schema_url": "resource_schema_url",
    "Resource.attributes": "resource_attributes",
    "Resource.dropped_attributes_count": "resource_dropped_attributes_count",
    "ScopeSpans.schema_url": "scope_schema_url",
    "InstrumentationScope.name": "scope_name",
    "InstrumentationScope.version": "scope_version",
    "InstrumentationScope.attributes": "scope_attributes",
    "InstrumentationScope.dropped_attributes_count": "scope_dropped_attributes_count",
    "Span.trace_id": "trace_id",
    "Span.span_id": "span_id",
    "Span.trace_state": "trace_state",
    "Span.parent_span_id": "parent_span_id",
    "Span.flags": "flags",
    "Span.name": "name",
    "Span.kind": "kind",
    "Span.start_time_unix_nano": "start_time_unix_nano",
    "Span.end_time_unix_nano": "end_time_unix_nano",
    "Span.attributes": "attributes",
    "Span.dropped_attributes_count": "dropped_attributes_count",
    "Span.events": "events",
    "Span.dropped_events_count": "dropped_events_count",
    "Span.links": "links",
    "Span.dropped_links_count": "dropped_links_count",
    "Event.time_unix_nano": "events.time_unix_nano",
    "Event.name": "events.name",
    "Event.attributes": "events.attributes",
    "Event.dropped_attributes_count": "events.dropped_attributes_count",
    "Link.trace_id": "links.trace_id",
    "Link.span_id": "links.span_id",
    "Link.trace_state": "links.trace_state",
    "Link.attributes": "links.attributes",
    "Link.dropped_attributes_count": "links.dropped_attributes_count",
    "Link.flags": "links.flags",
    "Status.message": "status_message",
    "Status.code": "status_code",
    # attribute collections are JSON objects: keys are the KeyValue keys, values the AnyValues
    "KeyValue.key": ATTRIBUTE_COLUMNS,
    "KeyValue.value": ATTRIBUTE_COLUMNS,
    "AnyValue.string_value": ATTRIBUTE_COLUMNS,
    "AnyValue.bool_value": ATTRIBUTE_COLUMNS,
    "AnyValue.int_value": ATTRIBUTE_COLUMNS,
    "AnyValue.double_value": ATTRIBUTE_COLUMNS,
    "AnyValue.array_value": ATTRIBUTE_COLUMNS,
    "AnyValue.kvlist_value": ATTRIBUTE_COLUMNS,
    "AnyValue.bytes_value": ATTRIBUTE_COLUMNS,  # base64 in the JSON
    "ArrayValue.values": ATTRIBUTE_COLUMNS,
    "KeyValueList.values": ATTRIBUTE_COLUMNS,
}

# Fields with no column of their own whose children are flattened into the row.
FLATTENED = {"ResourceSpans.resource", "ResourceSpans.scope_spans", "ScopeSpans.scope", "ScopeSpans.spans",
             "Span.status"}


def column_exists(path: str) -> bool:
    name, _, child = path.partition(".")
    if name not in SEGMENT_SCHEMA.names:
        return False
    if not child:
        return True
    type_ = SEGMENT_SCHEMA.field(name).type
    if pa.types.is_list(type_):
        type_ = type_.value_type
    return pa.types.is_struct(type_) and type_.get_field_index(child) >= 0


def walk(descriptor: Descriptor, seen: set[str]) -> list[tuple[str, FieldDescriptor]]:
    if descriptor.full_name in seen:
        return []
    seen.add(descriptor.full_name)
    found = []
    for field in descriptor.fields:
        name = f"{descriptor.name}.{field.name}"
        found.append((name, field))
        descend = name in WHERE or name in FLATTENED
        if field.message_type is not None and descend:
            found += walk(field.message_type, seen)
    return found


def test_every_otlp_trace_field_has_a_column_or_a_reason() -> None:
    homeless = []
    for name, _ in walk(ResourceSpans.DESCRIPTOR, set()):
        if name in FLATTENED or name in UNSTORED_OTLP_FIELDS:
            continue
        targets = WHERE.get(name)
        if targets is None:
            homeless.append(f"{name}: no column in SEGMENT_SCHEMA and not in UNSTORED_OTLP_FIELDS")
            continue
        for target in (targets,) if isinstance(targets, str) else targets:
            if not column_exists(target):
                homeless.append(f"{name}: mapped to {target}, which SEGMENT_SCHEMA lacks")
    assert not homeless, "\n".join(homeless)


def test_the_full_sample_request_sets_every_stored_field() -> None:
    """So the end-to-end 'every field arrives' tests really carry a value in each field."""
    request = s.full_request()
    resource_spans = request.resource_spans[0]
    scope_spans = resource_spans.scope_spans[0]
    span = scope_spans.spans[0]
    messages = {
        "ResourceSpans": resource_spans, "Resource": resource_spans.resource, "ScopeSpans": scope_spans,
        "InstrumentationScope": scope_spans.scope, "Span": span, "Event": span.events[0],
        "Link": span.links[0], "Status": span.status,
    }
    unset = []
    for name in WHERE:
        message_name, field_name = name.split(".")
        message = messages.get(message_name)
        if message is None:
            continue
        field = message.DESCRIPTOR.fields_by_name[field_name]
        value = getattr(message, field_name)
        repeated = field.is_repeated
        if (len(value) == 0) if repeated else value == field.default_value:
            unset.append(name)
    assert not unset, f"full_request leaves these at their default: {unset}"
