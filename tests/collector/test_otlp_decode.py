"""The decoder on its own: OTLP protobuf and OTLP/JSON in, SEGMENT_SCHEMA rows out, bad spans explained."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import otlp_samples as s
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from turnlens.collector import otlp_attributes, otlp_decode, otlp_rows
from turnlens.collector.otlp_decode import OtlpDecodeError, decode_json, decode_protobuf
from turnlens.kernel.schema import SEGMENT_SCHEMA


def only_row(result: otlp_decode.DecodeResult) -> dict:
    assert result.rejected == 0, result.error_message()
    assert result.table.num_rows == 1
    return result.table.to_pylist()[0]


def test_every_field_of_a_protobuf_span_lands_in_its_column() -> None:
    row = only_row(decode_protobuf(s.full_request().SerializeToString(), received_unix_nano=42))
    assert row["trace_id"] == s.TRACE_ID.hex() and row["span_id"] == s.SPAN_ID.hex()
    assert row["parent_span_id"] == s.PARENT_ID.hex()
    assert (row["trace_state"], row["flags"], row["name"], row["kind"]) == (
        "vendor=opaque", 0x301, "execute_tool send_invoice", "client",
    )
    assert (row["start_time_unix_nano"], row["end_time_unix_nano"]) == (s.START, s.START + 5_000_000)
    attributes = json.loads(row["attributes"])
    for key, value in s.ALL_VALUE_KINDS_JSON.items():
        assert attributes[key] == value, key
    assert row["dropped_attributes_count"] == 5
    [event] = row["events"]
    assert event["name"] == "tool.committed" and event["time_unix_nano"] == s.START + 1000
    assert json.loads(event["attributes"]) == {"turnlens.hlc": s.HLC + 1, "turnlens.idempotency_key": "k-1"}
    assert (event["dropped_attributes_count"], event["hlc"]) == (6, s.HLC + 1)
    assert row["dropped_events_count"] == 7
    [link] = row["links"]
    assert link == {
        "trace_id": s.LINK_TRACE_ID.hex(), "span_id": s.LINK_SPAN_ID.hex(), "trace_state": "l=1",
        "attributes": '{"link.attr":9}', "dropped_attributes_count": 8, "flags": 0x100,
    }
    assert row["dropped_links_count"] == 9
    assert (row["status_code"], row["status_message"]) == ("error", "relay said no")
    assert json.loads(row["resource_attributes"])["host.name"] == "h1"
    assert row["resource_dropped_attributes_count"] == 3
    assert row["resource_schema_url"].endswith("1.30.0") and row["scope_schema_url"].endswith("1.31.0")
    assert (row["scope_name"], row["scope_version"]) == ("agent.runtime", "2.1.0")
    assert json.loads(row["scope_attributes"]) == {"scope.attr": "yes"}
    assert row["scope_dropped_attributes_count"] == 4
    # the contract's columns
    assert (row["service_name"], row["node"]) == ("payments", "payments-7")
    assert (row["span_session_id"], row["span_turn_id"]) == ("conv-1", "turn-1")
    assert row["layer"] == "tool"  # inferred from gen_ai.operation.name = execute_tool
    assert row["hlc"] == s.HLC  # sent as a string
    assert row["received_unix_nano"] == 42


def test_otlp_json_and_protobuf_of_one_request_give_the_same_rows() -> None:
    request = s.full_request()
    from_protobuf = decode_protobuf(request.SerializeToString(), received_unix_nano=1).table
    from_json = decode_json(orjson.dumps(s.to_otlp_json(request)), received_unix_nano=1).table
    assert from_json.schema.equals(SEGMENT_SCHEMA)
    proto_row, json_row = from_protobuf.to_pylist()[0], from_json.to_pylist()[0]
    for column in ("attributes", "resource_attributes", "scope_attributes"):
        assert json.loads(proto_row.pop(column)) == json.loads(json_row.pop(column)), column
    assert proto_row == json_row


def test_the_specification_example_json_decodes_with_lower_case_ids() -> None:
    row = only_row(decode_json(s.SPEC_EXAMPLE_JSON))
    assert row["trace_id"] == "5b8efff798038103d269b633813fc60c"
    assert row["span_id"] == "eee19b7ec3c1b174" and row["parent_span_id"] == "eee19b7ec3c1b173"
    assert row["kind"] == "server" and row["start_time_unix_nano"] == 1544712660000000000
    assert json.loads(row["scope_attributes"]) == {"my.scope.attribute": "some scope attribute"}
    assert row["service_name"] == row["node"] == "my.service"


def test_json_accepts_int64_as_strings_or_numbers_and_ignores_unknown_fields() -> None:
    document = orjson.loads(s.SPEC_EXAMPLE_JSON)
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["startTimeUnixNano"] = "1544712660000000001"
    span["endTimeUnixNano"] = "0"
    span["futureField"] = {"nested": [1, 2]}
    span["kind"] = "SPAN_KIND_CONSUMER"  # enum names are accepted beside the integers OTLP/JSON uses
    span["status"] = {"code": 2, "message": "boom"}
    span["attributes"].append({"key": "n", "value": {"intValue": "-5"}, "futureKey": 1})
    document["futureTopLevel"] = True
    row = only_row(decode_json(orjson.dumps(document)))
    assert row["start_time_unix_nano"] == 1544712660000000001
    assert row["end_time_unix_nano"] is None  # 0 on the wire: the span never ended
    assert json.loads(row["attributes"])["n"] == -5
    assert (row["kind"], row["status_code"], row["status_message"]) == ("consumer", "error", "boom")


def test_invalid_spans_are_rejected_with_reasons_and_the_rest_stored() -> None:
    request = s.simple_request(5)
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[1].trace_id = b"\x01" * 15
    spans[2].span_id = b""
    spans[3].span_id = bytes(8)  # all zero: invalid per W3C
    result = decode_protobuf(request.SerializeToString())
    assert (result.accepted, result.rejected) == (2, 3)
    message = result.error_message()
    assert "trace_id must be 16 bytes, got 15" in message and "span_id must be 8 bytes, got 0" in message
    assert "span_id is all zero" in message
    assert set(result.table.column("name").to_pylist()) == {"span-0", "span-4"}


def test_json_spans_with_bad_ids_are_rejected_too() -> None:
    document = orjson.loads(s.SPEC_EXAMPLE_JSON)
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append({**spans[0], "spanId": "not-hex"})
    spans.append({**spans[0], "traceId": "abcd"})
    result = decode_json(orjson.dumps(document))
    assert (result.accepted, result.rejected) == (1, 2)


@pytest.mark.parametrize(
    "body",
    [b"\xff\xff\xff garbage", b"\x0a\x05\x12\x03"],  # not protobuf; a truncated nested message
)
def test_undecodable_protobuf_raises(body: bytes) -> None:
    with pytest.raises(OtlpDecodeError):
        decode_protobuf(body)


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1, 2]", b'{"resourceSpans": {"not": "a list"}}',
     b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}'],
)
def test_undecodable_json_raises(body: bytes) -> None:
    with pytest.raises(OtlpDecodeError):
        decode_json(body)


def test_contract_columns_fall_back_as_the_contract_says() -> None:
    request = s.simple_request(1)
    resource = request.resource_spans[0].resource
    del resource.attributes[:]
    resource.attributes.append(s.kv("service.name", "edge"))  # no service.instance.id
    span = request.resource_spans[0].scope_spans[0].spans[0]
    del span.attributes[:]
    span.kind = 2  # server
    span.attributes.extend([s.kv("http.request.method", "POST"), s.kv("turnlens.hlc", "not a number")])
    row = only_row(decode_protobuf(request.SerializeToString()))
    assert row["node"] == "edge"
    assert row["layer"] == "http"
    assert row["hlc"] is None and row["span_session_id"] is None and row["span_turn_id"] is None


def test_a_large_request_converted_in_chunks_gives_the_same_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference decoder converts rows to Arrow in chunks; the compiled walker must equal it."""
    decode_protobuf = otlp_decode.decode_protobuf_reference
    request = s.simple_request(300)
    second = request.resource_spans.add()
    second.resource.attributes.append(s.kv("service.name", "other"))
    second.scope_spans.add().spans.extend(s.simple_request(50, seed=9).resource_spans[0].scope_spans[0].spans)
    body = request.SerializeToString()
    whole = decode_protobuf(body, received_unix_nano=1).table
    monkeypatch.setattr(otlp_rows.Rows, "CHUNK_SPANS", 64)
    chunked = decode_protobuf(body, received_unix_nano=1).table
    assert chunked.num_rows == 350
    assert chunked.to_pylist() == whole.to_pylist()
    assert chunked.column("service_name").to_pylist().count("other") == 50


def test_repeated_attribute_values_decode_the_same_from_the_cache() -> None:
    decode_protobuf = otlp_decode.decode_protobuf_reference  # the compiled walker caches nothing
    body = s.full_request().SerializeToString()
    first = decode_protobuf(body, received_unix_nano=1).table.to_pylist()
    again = decode_protobuf(body, received_unix_nano=1).table.to_pylist()
    otlp_attributes.kv_cache.clear()
    otlp_attributes.key_cache.clear()
    cold = decode_protobuf(body, received_unix_nano=1).table.to_pylist()
    assert first == again == cold


def test_an_empty_request_gives_an_empty_table() -> None:
    result = decode_protobuf(ExportTraceServiceRequest().SerializeToString())
    assert result.table.num_rows == 0 and result.table.schema.equals(SEGMENT_SCHEMA)
    assert decode_json(b"{}").table.num_rows == 0


def test_keys_whose_values_never_repeat_stop_filling_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    decode_protobuf = otlp_decode.decode_protobuf_reference  # the compiled walker caches nothing
    monkeypatch.setattr(otlp_attributes.Volatility, "EPOCH", 200)
    monkeypatch.setattr(otlp_attributes, "volatility", otlp_attributes.Volatility())
    otlp_attributes.kv_cache.clear()
    for seed in range(1, 6):  # every span a new turnlens.hlc; session.id repeats within a request
        request = s.simple_request(100, seed=seed)
        for i, span in enumerate(request.resource_spans[0].scope_spans[0].spans):
            span.attributes[1].value.int_value = s.HLC + seed * 1000 + i
        decode_protobuf(request.SerializeToString())
    cached_keys = [raw for raw in otlp_attributes.kv_cache if b"turnlens.hlc" in raw]
    assert otlp_rows.contract.HLC in otlp_attributes.volatility.volatile
    assert len(cached_keys) < 250  # the first epochs only, not all 500
    assert any(b"session.id" in raw for raw in otlp_attributes.kv_cache)


def test_an_attribute_key_that_is_not_utf8_is_a_decode_error_not_a_crash() -> None:
    """Attribute bytes bypass protobuf's UTF-8 check, so the decoder must refuse them itself (a 400)."""
    body = s.simple_request(1).SerializeToString()
    assert body.count(b"session.id") == 1
    corrupted = body.replace(b"session.id", b"\xff" * len(b"session.id"))  # same length: valid wire format
    with pytest.raises(OtlpDecodeError):
        decode_protobuf(corrupted)


def full_json() -> dict:
    """The full sample request in OTLP/JSON: one span with an event, a link and a status."""
    return s.to_otlp_json(s.full_request())


def _at(document: dict, path: str) -> tuple[dict, str]:
    """The object holding the last key of `path` (dots; [n] picks a list item) and that key."""
    *parents, last = path.split(".")
    node: Any = document
    for part in parents:
        name, _, index = part.partition("[")
        node = node[name]
        if index:
            node = node[int(index.rstrip("]"))]
    return node, last


SPAN = "resourceSpans[0].scopeSpans[0].spans[0]"
TYPED_FIELDS = {  # path -> the name the error message must give
    f"{SPAN}.name": "name", f"{SPAN}.traceState": "traceState", f"{SPAN}.status.message": "status.message",
    f"{SPAN}.events[0].name": "event name", f"{SPAN}.links[0].traceState": "link traceState",
    "resourceSpans[0].scopeSpans[0].scope.name": "scope.name",
    "resourceSpans[0].scopeSpans[0].scope.version": "scope.version",
    "resourceSpans[0].schemaUrl": "resourceSpans.schemaUrl",
    "resourceSpans[0].scopeSpans[0].schemaUrl": "scopeSpans.schemaUrl",
    f"{SPAN}.attributes[0].value.stringValue": "stringValue",
}
COUNT_FIELDS = {
    f"{SPAN}.flags": "flags", f"{SPAN}.links[0].flags": "link flags",
    f"{SPAN}.droppedAttributesCount": "droppedAttributesCount",
    f"{SPAN}.droppedEventsCount": "droppedEventsCount", f"{SPAN}.droppedLinksCount": "droppedLinksCount",
    f"{SPAN}.events[0].droppedAttributesCount": "droppedAttributesCount",
    "resourceSpans[0].resource.droppedAttributesCount": "droppedAttributesCount",
}


@pytest.mark.parametrize("path", [*TYPED_FIELDS, *COUNT_FIELDS])
def test_json_of_the_wrong_type_or_range_is_refused_naming_the_field(path: str) -> None:
    """Each was an ArrowTypeError or an OverflowError (HTTP 500) before; all must be 400s that say why."""
    name = TYPED_FIELDS.get(path) or COUNT_FIELDS[path]
    bad_values = [5, True, ["x"], {"x": 1}] if path in TYPED_FIELDS else [2**64, str(2**63), -1, "x", [1]]
    for bad in bad_values:
        document = full_json()
        parent, key = _at(document, path)
        assert key in parent, path  # the sample sets every field tested
        parent[key] = bad
        with pytest.raises(OtlpDecodeError, match=re.escape(name)):
            decode_json(json.dumps(document))  # the stdlib writes integers past 64 bits


@pytest.mark.parametrize(
    ("value", "name"),
    [({"boolValue": "yes"}, "boolValue"), ({"intValue": str(2**64)}, "intValue"),
     ({"doubleValue": [1]}, "doubleValue"), ({"arrayValue": {"values": 5}}, "arrayValue"),
     ({"kvlistValue": []}, "kvlistValue")],
)
def test_json_attribute_values_of_the_wrong_type_are_refused(value: dict, name: str) -> None:
    document = full_json()
    parent, _ = _at(document, f"{SPAN}.attributes[0].value")
    parent["value"] = value
    with pytest.raises(OtlpDecodeError, match=name):
        decode_json(orjson.dumps(document))
