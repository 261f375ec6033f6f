"""Millions of spans for benchmarks: a short simulation is encoded once into OTLP protobuf requests,
then copied with fresh ids by patching bytes in place, so the copies cost almost nothing to make.

Every copy rewrites the first 4 bytes of each trace and span id (and the first 8 hex digits of each
session, turn, call id and idempotency key) with the copy's number; lengths never change, so the
protobuf stays valid and every copy is a distinct set of sessions, turns and calls with the same
shapes, timings and findings as the template.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from turnlens.kernel import contract as c
from turnlens.sample_data.simulate import Simulation, to_request

_BINARY_ID_TAGS = (b"\x0a\x10", b"\x12\x08", b"\x22\x08")  # trace_id, span_id / link span_id, parent_span_id
_TEXT_IDS = re.compile(rb"(?:sess-|turn-|call_)[0-9a-f]{8}|[0-9a-f]{32}")


@dataclass(frozen=True)
class Template:
    """One encoded request and where its ids sit in the bytes."""

    data: bytes
    spans: int
    binary_id_offsets: tuple[int, ...]  # first byte of each 8- or 16-byte id
    text_id_offsets: tuple[int, ...]  # first of the 8 hex digits to overwrite


def build_templates(
    *, spans_per_request: int = 512, sessions: int = 40, seed: int = 7, shared_keys: int = 0
) -> list[Template]:
    """Runs a short simulation and encodes it into requests of `spans_per_request` spans. The first
    `shared_keys` idempotency keys (in the order the requests hold them) are left as they are in every copy: a
    client reusing keys across sessions, each such key carried by one turn of every copy."""
    sim = Simulation(sessions=sessions, seed=seed, chaos=False)
    spans = [span for batch in sim.batches() for span in batch]
    ids: set[bytes] = set()
    keys: set[bytes] = set()
    for span in spans:
        ids.add(span.context.trace_id.to_bytes(16, "big"))
        ids.add(span.context.span_id.to_bytes(8, "big"))
        for event in span.events:
            key = (event.attributes or {}).get(c.IDEMPOTENCY_KEY)
            if isinstance(key, str):
                keys.add(key.encode())
    templates = []
    order: list[bytes] = []  # the keys in the order the requests first hold them
    for start in range(0, len(spans), spans_per_request):
        chunk = spans[start : start + spans_per_request]
        data = to_request(chunk).SerializeToString()
        binary = sorted(
            {
                m.end()
                for tag in _BINARY_ID_TAGS
                for m in re.finditer(re.escape(tag), data)
                if data[m.end() : m.end() + (16 if tag == b"\x0a\x10" else 8)] in ids
            }
        )
        text = []
        for m in _TEXT_IDS.finditer(data):
            token = m.group()
            if len(token) == 32:
                if token not in keys:
                    continue
                if token not in order:
                    order.append(token)
                if order.index(token) < shared_keys:
                    continue
            text.append(m.start() if len(token) == 32 else m.end() - 8)
        templates.append(Template(data, len(chunk), tuple(binary), tuple(text)))
    return templates


def request_stream(
    total_spans: int, *, spans_per_request: int = 512, seed: int = 7, templates: list[Template] | None = None
) -> Iterator[bytes]:
    """Serialized ExportTraceServiceRequest messages holding at least `total_spans` spans in all."""
    for data, _ in counted_requests(
        total_spans, spans_per_request=spans_per_request, seed=seed, templates=templates
    ):
        yield data


def counted_requests(
    total_spans: int, *, spans_per_request: int = 512, seed: int = 7, templates: list[Template] | None = None
) -> Iterator[tuple[bytes, int]]:
    """Like `request_stream`, with the number of spans in each request."""
    templates = templates or build_templates(spans_per_request=spans_per_request, seed=seed)
    produced, copy = 0, 0
    while produced < total_spans:
        copy += 1
        binary_prefix = copy.to_bytes(4, "big")
        text_prefix = f"{copy:08x}".encode()
        for template in templates:
            buf = bytearray(template.data)
            for offset in template.binary_id_offsets:
                buf[offset : offset + 4] = binary_prefix
            for offset in template.text_id_offsets:
                buf[offset : offset + 8] = text_prefix
            yield bytes(buf), template.spans
            produced += template.spans
            if produced >= total_spans:
                return
