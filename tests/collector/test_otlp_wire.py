"""The compiled protobuf walker (collector/_otlp_wire.pyx) against the pure-Python reference decoder.

The collector stores what `decode_protobuf` returns, and that is the compiled walker's output; the
reference (`decode_protobuf_reference`) is the readable statement of the rules. For every request
here — each OTLP field of the schema-coverage walk set to ordinary and edge values, the simulator's
and the benchmark's requests, hand-made oddities, and thousands of corrupted bodies — both must give
the same rows, the same rejections and reasons, or the same error.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import benchscripts
import orjson
import otlp_samples as s
import pyarrow as pa
import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans
from test_schema_coverage import walk
from turnlens.collector import otlp_decode
from turnlens.collector.otlp_decode import OtlpDecodeError, decode_protobuf, decode_protobuf_reference
from turnlens.kernel.schema import SEGMENT_SCHEMA


def outcome(decode: Any, body: bytes) -> tuple[Any, ...]:
    try:
        result = decode(body, received_unix_nano=7)
    except OtlpDecodeError as exc:
        return ("error", str(exc))
    return ("ok", result.table, result.rejected, dict(result.reasons))


def assert_same(body: bytes) -> tuple[Any, ...]:
    """Both decoders agree on `body`; returns the outcome."""
    compiled, reference = outcome(decode_protobuf, body), outcome(decode_protobuf_reference, body)
    if compiled[0] == "ok" and reference[0] == "ok":
        table, expected = compiled[1], reference[1]
        table.validate(full=True)  # offsets, validity bitmaps and UTF-8 of the hand-built buffers
        assert table.schema.equals(SEGMENT_SCHEMA)
        if not table.equals(expected):
            differing = [name for name in table.column_names if not table[name].equals(expected[name])]
            first = differing[0]
            raise AssertionError(
                f"columns {differing} differ; {first}: {table[first].to_pylist()[:3]} "
                f"!= {expected[first].to_pylist()[:3]}"
            )
        assert compiled[2:] == reference[2:]
    else:
        assert compiled == reference
    return compiled


def test_the_collector_decodes_with_the_compiled_walker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed build must fail here (and at import), not leave a collector ten times slower."""
    assert otlp_decode._otlp_wire.__file__.endswith((".so", ".pyd")), otlp_decode._otlp_wire.__file__

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a plain request went to the pure-Python reference decoder")

    monkeypatch.setattr(otlp_decode, "decode_protobuf_reference", refuse)
    result = decode_protobuf(s.full_request().SerializeToString())
    assert result.accepted == 1 and result.rejected == 0


def test_the_built_walker_is_not_older_than_its_source() -> None:
    """After a pull that changes the .pyx, the old build would still import: say so until rebuilt."""
    source = Path(otlp_decode.__file__).with_name("_otlp_wire.pyx")
    if not source.exists():  # an installed wheel ships the built module only
        pytest.skip("no source beside the installed module")
    built = Path(otlp_decode._otlp_wire.__file__)
    assert built.stat().st_mtime >= source.stat().st_mtime, f"{built.name} is stale: run `make install`"


# --- every field of the coverage walk, ordinary and edge values ------------------------------------

def edge_values(field: FieldDescriptor) -> list[Any]:
    t = FieldDescriptor
    if field.type == t.TYPE_STRING:
        return ["", "ü\u2028\U0001f600 \"q\" \\ \n\t\x00\x1f\x7f", "x" * 300]
    if field.type == t.TYPE_BYTES:
        return [b"", bytes(16), bytes(8), b"\x01" * 16, b"\x02" * 8, b"\x03" * 7]
    if field.type in (t.TYPE_FIXED64, t.TYPE_UINT64):
        return [0, 1, 2**63 - 1, 2**63, 2**64 - 1]
    if field.type in (t.TYPE_UINT32, t.TYPE_FIXED32):
        return [0, 1, 2**32 - 1]
    if field.type in (t.TYPE_INT32, t.TYPE_ENUM):
        return [0, 1, 2, 3, 5, 6, -1, 2**31 - 1]
    if field.type == t.TYPE_INT64:
        return [0, -1, 2**63 - 1, -(2**63)]
    if field.type == t.TYPE_BOOL:
        return [False, True]
    if field.type == t.TYPE_DOUBLE:
        return [0.0, -0.5, 1e300, 1e-7, float("nan"), float("inf")]
    return []


def messages_of(request: ExportTraceServiceRequest) -> dict[str, list[Message]]:
    """Every message of the full sample request by descriptor name (AnyValues of each attribute)."""
    found: dict[str, list[Message]] = {}

    def visit(message: Message) -> None:
        found.setdefault(message.DESCRIPTOR.name, []).append(message)
        for field, value in message.ListFields():
            if field.message_type is None:
                continue
            for item in value if field.is_repeated else [value]:
                visit(item)

    visit(request)
    return found


def field_variants() -> list[tuple[str, bytes]]:
    variants = []
    fields = [(name, field) for name, field in walk(ResourceSpans.DESCRIPTOR, set())
              if field.message_type is None and not field.is_repeated]
    assert len(fields) > 30  # the walk reaches spans, events, links, status, attributes
    for name, field in fields:
        message_name = name.split(".")[0]
        for which in range(len(messages_of(s.full_request()).get(message_name, []))):
            for value in edge_values(field):
                request = s.full_request()
                target = messages_of(request)[message_name][which]
                oneof = field.containing_oneof
                if oneof is not None and target.WhichOneof(oneof.name) is None:
                    continue  # an empty AnyValue stays empty (its own case)
                if oneof is not None and target.WhichOneof(oneof.name) != field.name:
                    continue  # setting it would turn an array or kvlist into a scalar: covered below
                setattr(target, field.name, value)
                variants.append((f"{name}[{which}]={value!r}"[:80], request.SerializeToString()))
    return variants


FIELD_VARIANTS = field_variants()


@pytest.mark.parametrize("body", [body for _, body in FIELD_VARIANTS], ids=[n for n, _ in FIELD_VARIANTS])
def test_each_field_of_the_otlp_walk_decodes_the_same(body: bytes) -> None:
    assert_same(body)


# --- whole requests of the simulator, the benchmark, the tests ------------------------------------

def test_the_simulators_requests_decode_the_same() -> None:
    from turnlens.sample_data.bulk import build_templates, counted_requests

    templates = build_templates(spans_per_request=512, sessions=40, seed=3)
    bodies = [template.data for template in templates]
    bodies += [body for body, _ in counted_requests(2048, templates=templates[:2])]
    spans = 0
    for body in bodies:
        spans += assert_same(body)[1].num_rows
    assert spans > 2000


def test_the_benchmarks_requests_decode_the_same() -> None:
    bench = benchscripts.load("ingest")
    for index in range(3):
        table = assert_same(bench.build_request(index, 512).SerializeToString())[1]
        assert table.num_rows == 512 and table.column("layer").null_count == 0


def test_the_collector_tests_requests_decode_the_same() -> None:
    request = s.simple_request(300)
    second = request.resource_spans.add()
    second.resource.attributes.append(s.kv("service.name", "other"))
    second.scope_spans.add().spans.extend(s.simple_request(50, seed=9).resource_spans[0].scope_spans[0].spans)
    second.scope_spans.add()  # a scope without spans
    request.resource_spans.add()  # a resource without scopes
    assert_same(request.SerializeToString())
    assert_same(ExportTraceServiceRequest().SerializeToString())
    assert_same(b"")


# --- what the walker does itself, and what it hands back ------------------------------------------

def span_with(*attributes: Any, kind: int = 1, events: list[list[Any]] | None = None) -> bytes:
    request = s.simple_request(1)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    del span.attributes[:]
    span.kind = kind
    span.attributes.extend(attributes)
    for event_attributes in events or []:
        span.events.add(time_unix_nano=s.START, name="e").attributes.extend(event_attributes)
    return request.SerializeToString()


ODD_SPANS = {
    "no attributes": span_with(),
    "layer inferred for a server": span_with(s.kv("http.request.method", "GET"), kind=2),
    "layer inferred for a client": span_with(s.kv("peer.service", "bank"), kind=3),
    "empty layer": span_with(s.kv("turnlens.layer", ""), s.kv("gen_ai.operation.name", "chat")),
    "int session id": span_with(s.kv("session.id", 42), s.kv("turnlens.layer", "http")),
    "bool session id": span_with(s.kv("session.id", True), s.kv("turnlens.layer", "http")),
    "empty-value session falls to conversation": span_with(
        s.kv("session.id", None), s.kv("gen_ai.conversation.id", "c"), s.kv("turnlens.layer", "tool")
    ),
    "hlc as string, bool, float, huge": span_with(
        s.kv("turnlens.hlc", "12"), s.kv("turnlens.layer", "x"),
        events=[[s.kv("turnlens.hlc", True)], [s.kv("turnlens.hlc", 3.0)], [s.kv("turnlens.hlc", "9" * 30)]],
    ),
    "duplicate keys, the last read": span_with(
        s.kv("turnlens.layer", "a"), s.kv("turnlens.layer", "b"), s.kv("session.id", "1"),
        s.kv("session.id", "2"), events=[[s.kv("turnlens.hlc", 1), s.kv("turnlens.hlc", 2)]],
    ),
    "array and kvlist read keys": span_with(s.kv("turnlens.layer", ["x"]), s.kv("session.id", {"a": 1})),
    "every value kind": span_with(*[s.kv(k, v) for k, v in s.ALL_VALUE_KINDS.items()]),
    "escapes in keys and values": span_with(
        s.kv('k"\\\n\x01ü', 'v"\\\n\x01ü\u2028'), s.kv("", ""), s.kv("e", ""), s.kv("z", 0)
    ),
    "long keys and values": span_with(s.kv("k" * 200, "v" * 70_000), s.kv("turnlens.layer", "l" * 300)),
    "negative ints": span_with(s.kv("i", -1), s.kv("turnlens.hlc", -(2**63)), s.kv("turnlens.layer", "x")),
}


@pytest.mark.parametrize("body", ODD_SPANS.values(), ids=ODD_SPANS.keys())
def test_odd_spans_decode_the_same(body: bytes) -> None:
    assert assert_same(body)[0] == "ok"


def test_invalid_spans_are_rejected_for_the_same_reasons() -> None:
    request = s.simple_request(9)
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].trace_id = b"\x01" * 15
    spans[1].span_id = bytes(8)
    spans[2].parent_span_id = b"\x01" * 3
    spans[3].end_time_unix_nano = 2**63
    spans[4].links.add(trace_id=bytes(16), span_id=b"\x01" * 8)
    spans[5].links.add(trace_id=b"\x01" * 16, span_id=b"\x01" * 8)
    spans[5].links.add(trace_id=b"\x01" * 16, span_id=b"")
    spans[6].events.add(time_unix_nano=2**63, name="late").attributes.append(s.kv("turnlens.hlc", 5))
    spans[7].links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8).attributes.append(s.kv("a", [1, "b"]))
    _, table, rejected, reasons = assert_same(request.SerializeToString())
    assert (table.num_rows, rejected) == (2, 7) and len(reasons) == 7


def test_non_utf8_attributes_are_the_same_error() -> None:
    body = s.simple_request(2).SerializeToString()
    key = body.replace(b"session.id", b"\xff" * len(b"session.id"), 1)
    value = s.simple_request(1)
    value.resource_spans[0].scope_spans[0].spans[0].attributes.append(s.kv("k", "\u00e9"))
    value_body = value.SerializeToString().replace("\u00e9".encode(), b"\xed\xa0", 1)  # a surrogate half
    for corrupted in (key, value_body):
        assert assert_same(corrupted)[0] == "error"


def test_wire_forms_the_walker_leaves_to_the_reference_decode_the_same() -> None:
    """Fields out of order, unknown fields, a singular message sent twice (merged), mistyped fields."""
    body = s.full_request().SerializeToString()
    unknown = b"\xf8\x07\x01" + b"\xfa\x07\x02ab" + b"\xfd\x07abcd" + b"\xf9\x07" + b"12345678"
    resource_spans = ResourceSpans.FromString(s.full_request().resource_spans[0].SerializeToString())
    twice = bytearray()
    for field, value in reversed(resource_spans.ListFields()):  # schema_url, scope_spans, then resource
        for item in value if field.is_repeated else [value]:
            data = item.SerializeToString() if isinstance(item, Message) else item.encode()
            twice += bytes([field.number << 3 | 2]) + encode_varint(len(data)) + data
    reordered = b"\x0a" + encode_varint(len(twice)) + bytes(twice)
    merged_resource = resource_spans.resource.SerializeToString()
    merged = b"\x0a" + encode_varint(len(twice) + len(merged_resource) + 2)
    merged += bytes(twice) + b"\x0a" + encode_varint(len(merged_resource)) + merged_resource
    mistyped = b"\x0a\x04" + b"\x18\x01" + b"\x1a\x00"  # ResourceSpans.schema_url sent as a varint
    for case in (unknown + body + unknown, reordered, merged, mistyped):
        assert_same(case)


def encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


# --- corrupted bodies -----------------------------------------------------------------------------

def test_truncated_bodies_give_the_same_outcome() -> None:
    body = s.full_request().SerializeToString()
    outcomes = {assert_same(body[:end])[0] for end in range(len(body))}
    assert outcomes == {"ok", "error"}


def test_corrupted_bodies_give_the_same_outcome() -> None:
    """Bytes changed, copied in or cut out; seeded, so a failure names a body that can be replayed."""
    rng = random.Random(11)
    bases = [s.full_request().SerializeToString(), s.simple_request(4).SerializeToString()]
    bases += ODD_SPANS.values()
    outcomes: set[str] = set()
    for _ in range(4000):
        body = bytearray(rng.choice(bases))
        change = rng.random()
        if change < 0.7:
            for _flip in range(rng.randint(1, 3)):
                at = rng.randrange(len(body))
                body[at] = rng.choice((rng.randrange(256), body[at] ^ 0x80, 0, 0x7F, (body[at] + 1) & 0xFF))
        elif change < 0.85:
            at, source = rng.randrange(len(body)), rng.randrange(len(body))
            body[at:at] = body[source : source + rng.randint(1, 20)]
        else:
            at = rng.randrange(len(body))
            del body[at : at + rng.randint(1, 10)]
        outcomes.add(assert_same(bytes(body))[0])
    assert outcomes == {"ok", "error"}


def test_a_rejected_spans_malformed_event_still_makes_the_request_malformed() -> None:
    """Found by the corruption test: the walker skipped a rejected span's events, which protobuf parses."""
    request = s.simple_request(1)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.start_time_unix_nano = 2**63  # rejected for its timestamp
    span.events.add(time_unix_nano=1, name="e").attributes.append(s.kv("k", "v"))
    body = request.SerializeToString()
    event = span.events[0].SerializeToString()
    attribute = s.kv("k", "v").SerializeToString()
    broken = event.replace(b"\x1a" + bytes([len(attribute)]) + attribute, b"\x1a\x7f" + attribute, 1)
    assert broken != event  # the attribute's length now runs past the event's end
    corrupted = body.replace(event, broken, 1)
    assert assert_same(corrupted)[0] == "error"
    span.events[0].name = "\u00e9"
    bad_name = request.SerializeToString().replace("\u00e9".encode(), b"\xc3\x28", 1)
    assert assert_same(bad_name)[0] == "error"
    del span.events[:]
    span.links.add(trace_id=b"\x01" * 16, span_id=b"\x01" * 8, trace_state="\u00e9")
    bad_link = request.SerializeToString().replace("\u00e9".encode(), b"\xc3\x28", 1)
    assert assert_same(bad_link)[0] == "error"


def test_a_bytearray_body_is_read_as_is() -> None:
    """The HTTP receiver hands over a bytearray when it read the body in pieces."""
    body = s.full_request().SerializeToString()
    assert decode_protobuf(bytearray(body), received_unix_nano=7).table.equals(
        decode_protobuf(body, received_unix_nano=7).table
    )
    assert isinstance(decode_protobuf(memoryview(body)).table, pa.Table)


def test_utf8_is_judged_as_python_judges_it() -> None:
    """Every lead byte with boundary continuation bytes: overlongs, surrogates, past U+10FFFF, cut short."""
    request = s.simple_request(1)
    request.resource_spans[0].scope_spans[0].spans[0].attributes.append(s.kv("k", "\x01\x02\x03\x04"))
    body = request.SerializeToString()
    assert body.count(b"\x01\x02\x03\x04") == 1
    seconds = (0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF)
    judged = set()
    for lead in range(256):
        for second in seconds:
            for rest in ((0x80, 0x80), (0xBF, 0xBF), (0x41, 0x80), (0x80, 0x41)):
                text = bytes((lead, second, *rest))
                judged.add(assert_same(body.replace(b"\x01\x02\x03\x04", text))[0])
    assert judged == {"ok", "error"}


def test_each_span_carries_its_own_resource_and_scope_when_a_request_has_many() -> None:
    """An SDK batch holds one resource per service: the runs of resource and scope values must line up."""
    request = ExportTraceServiceRequest()
    expected = []
    for r in range(7):
        resource_spans = request.resource_spans.add(schema_url=f"r{r}" if r % 2 else "")
        resource_spans.resource.attributes.append(s.kv("service.name", f"svc-{r}"))
        for k in range(r % 3 + 1):
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = f"scope-{r}-{k}"
            spans = s.simple_request(k + r, seed=r * 10 + k).resource_spans[0].scope_spans[0].spans
            scope_spans.spans.extend(spans)
            expected += [(f"svc-{r}", f"r{r}" if r % 2 else None, f"scope-{r}-{k}")] * len(spans)
    table = assert_same(request.SerializeToString())[1]
    columns = [table[name].to_pylist() for name in ("service_name", "resource_schema_url", "scope_name")]
    got = zip(*columns, strict=True)
    assert list(got) == expected and len(expected) > 20


def test_escapes_at_every_offset_of_the_eight_byte_scan() -> None:
    """The walker skips plain ASCII eight bytes at a time: each special character at each offset."""
    attributes = []
    for special in ('"', "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "😀"):
        for at in range(18):
            text = "abcdefghijklmnopq"[:at] + special + "rstuvwxyz0123456"[: 17 - at]
            attributes.append(s.kv(f"{at}{text}", text))
    table = assert_same(span_with(*attributes))[1]
    assert len(orjson.loads(table["attributes"][0].as_py())) == len(attributes)


# --- what protobuf refuses, both refuse ------------------------------------------------------------

def protobuf_refuses(body: bytes) -> bool:
    """The official OTLP message parser's verdict (upb: lengths, varints, UTF-8 of every string)."""
    try:
        ExportTraceServiceRequest.FromString(body)
    except DecodeError:
        return True
    return False


def test_a_bool_attribute_cut_inside_its_varint_is_malformed_not_true() -> None:
    body = span_with(s.kv("flag", True))
    cut = body.replace(b"\x10\x01", b"\x10\x80", 1)  # the varint's continuation bit, then nothing
    assert protobuf_refuses(cut)
    assert assert_same(cut)[0] == "error"


def test_a_rejected_spans_malformed_attribute_still_makes_the_request_malformed() -> None:
    """Rejected spans' attributes are never converted, but protobuf parses them: no partial success."""
    request = s.simple_request(2)
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].trace_id = b"\x01" * 15  # rejected
    spans[0].attributes.append(s.kv("k", "é"))
    spans[0].links.add(trace_id=b"\x01" * 16, span_id=b"\x01" * 8).attributes.append(s.kv("l", "é"))
    body = request.SerializeToString()
    for at in (body.index("é".encode()), body.rindex("é".encode())):
        corrupted = body[:at] + b"\xc3\x28" + body[at + 2 :]
        assert protobuf_refuses(corrupted)
        assert assert_same(corrupted)[0] == "error"


def test_every_body_protobuf_refuses_is_refused() -> None:
    """Seeded corruptions of the sample requests: where protobuf's parser says malformed, so do both."""
    rng = random.Random(23)
    bases = [s.full_request().SerializeToString(), s.simple_request(4).SerializeToString()]
    refused = 0
    for _ in range(3000):
        body = bytearray(rng.choice(bases))
        for _flip in range(rng.randint(1, 3)):
            at = rng.randrange(len(body))
            body[at] = rng.choice((rng.randrange(256), body[at] ^ 0x80, (body[at] + 1) & 0xFF))
        if protobuf_refuses(bytes(body)):
            refused += 1
            assert assert_same(bytes(body))[0] == "error", bytes(body).hex()
    assert refused > 100
