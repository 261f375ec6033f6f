"""The columns of a stored segment: one row per span, every OTLP field with a place, plus the contract's.

Segments are Parquet files written by the collector and read by the SQL views in queries/base/.
Attribute collections are JSON objects in VARCHAR columns (`{"key": value}`: strings, numbers,
booleans, arrays, nested objects for kvlists, bytes as base64), so analysts can use DuckDB's JSON
functions on them. Ids are lower-case hex strings. Times are Unix nanoseconds (int64).

Every segment holds exactly these columns: the views read the segments without unifying their schemas (one
file's columns name every file's), and a segment with other columns is quarantined when a read or
compaction's sweep meets it (collector/quarantine.py). A change to these columns therefore needs the
older segments rewritten, or the views' reads unifying by name (`union_by_name`) until they are.
"""

from __future__ import annotations

import pyarrow as pa

EVENT_TYPE = pa.struct(
    [
        ("time_unix_nano", pa.int64()),
        ("name", pa.string()),
        ("attributes", pa.string()),  # JSON object
        ("dropped_attributes_count", pa.int64()),
        ("hlc", pa.int64()),  # the event's own turnlens.hlc, copied out because every timeline sorts on it
    ]
)

LINK_TYPE = pa.struct(
    [
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
        ("trace_state", pa.string()),
        ("attributes", pa.string()),  # JSON object
        ("dropped_attributes_count", pa.int64()),
        ("flags", pa.int64()),
    ]
)

SEGMENT_SCHEMA = pa.schema(
    [
        # --- span identity (OTLP Span) ---
        ("trace_id", pa.string()),  # 32 lower-case hex digits
        ("span_id", pa.string()),  # 16 lower-case hex digits
        ("parent_span_id", pa.string()),  # null for a root span (OTLP's empty bytes)
        ("trace_state", pa.string()),
        ("flags", pa.int64()),
        ("name", pa.string()),
        ("kind", pa.string()),  # unspecified / internal / server / client / producer / consumer
        ("start_time_unix_nano", pa.int64()),
        ("end_time_unix_nano", pa.int64()),  # null when the span never ended (0 on the wire)
        ("attributes", pa.string()),  # JSON object
        ("dropped_attributes_count", pa.int64()),
        ("events", pa.list_(EVENT_TYPE)),
        ("dropped_events_count", pa.int64()),
        ("links", pa.list_(LINK_TYPE)),
        ("dropped_links_count", pa.int64()),
        ("status_code", pa.string()),  # unset / ok / error
        ("status_message", pa.string()),
        # --- resource and scope, repeated per span (Parquet dictionary-encodes them) ---
        ("resource_attributes", pa.string()),  # JSON object
        ("resource_dropped_attributes_count", pa.int64()),
        ("resource_schema_url", pa.string()),
        ("scope_name", pa.string()),
        ("scope_version", pa.string()),
        ("scope_attributes", pa.string()),  # JSON object
        ("scope_dropped_attributes_count", pa.int64()),
        ("scope_schema_url", pa.string()),
        # --- the contract's columns, extracted at ingest because every view filters on them ---
        ("service_name", pa.string()),  # copied from the resource: the most-filtered column
        ("node", pa.string()),  # service.instance.id, else service.name: whose clock stamped the span
        ("span_session_id", pa.string()),  # session.id / gen_ai.conversation.id as stamped on this span
        ("span_turn_id", pa.string()),  # turnlens.turn.id as stamped on this span
        ("layer", pa.string()),  # turnlens.layer, else inferred (contract.infer_layer), else null
        ("hlc", pa.int64()),  # turnlens.hlc at span start, null when the span carries none
        ("received_unix_nano", pa.int64()),  # when the collector accepted it; the newest copy wins
    ]
)

# OTLP fields that deliberately have no column, with the reason (checked by the schema-coverage test).
UNSTORED_OTLP_FIELDS = {
    "Status.deprecated_code": "deprecated in OTLP; status_code carries the meaning",
    "ResourceSpans.scope_spans": "flattened: one row per span",
    "ScopeSpans.spans": "flattened: one row per span",
    "ResourceSpans.resource": "flattened into resource_* columns",
    "ScopeSpans.scope": "flattened into scope_* columns",
    "Span.status": "flattened into status_* columns",
    "Resource.entity_refs": "development-status entity references; they name keys of resource_attributes",
    "KeyValue.key_strindex": "string-table reference used by the profiles signal only; never set in traces",
    "AnyValue.string_value_strindex": "string-table reference used by the profiles signal only",
}
