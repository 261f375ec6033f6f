"""The recorded sample moved in time, so a demo opens with its incident a few minutes ago.

The sample was recorded on one day; the live traffic of `turnlens demo` is stamped now. Loaded as
recorded, "all" spans months with two slivers and "1h" hides the incident. Shifting every timestamp
and every HLC by the same whole number of milliseconds keeps each turn's order, durations, skews and
findings exactly as recorded.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from turnlens.kernel import contract

NS_PER_MS = 1_000_000
_TIME_FIELDS = ("startTimeUnixNano", "endTimeUnixNano")


def newest_ns(lines: list[bytes]) -> int:
    """The latest span end (or start) in OTLP/JSON lines, Unix ns."""
    newest = 0
    for span in _spans([orjson.loads(line) for line in lines]):
        for field in _TIME_FIELDS:
            if span.get(field):
                newest = max(newest, int(span[field]))
    return newest


def shift_lines(lines: list[bytes], delta_ms: int) -> list[bytes]:
    """The same OTLP/JSON lines with every span, event and HLC time `delta_ms` later."""
    shifted = []
    for line in lines:
        request = orjson.loads(line)
        for span in _spans([request]):
            _shift_times(span, delta_ms)
            for event in span.get("events", []):
                if event.get("timeUnixNano"):
                    event["timeUnixNano"] = str(int(event["timeUnixNano"]) + delta_ms * NS_PER_MS)
                _shift_hlc(event.get("attributes", []), delta_ms)
            _shift_hlc(span.get("attributes", []), delta_ms)
        shifted.append(orjson.dumps(request))
    return shifted


def write_shifted(sample: Path, out: Path, *, ends_before_now_s: float = 180.0) -> int:
    """Writes `sample` to `out` (gzip) moved to end `ends_before_now_s` ago; returns the shift in ms."""
    with gzip.open(sample, "rb") as source:
        lines = [line for line in source.read().splitlines() if line.strip()]
    target_ns = time.time_ns() - int(ends_before_now_s * 1e9)
    delta_ms = (target_ns - newest_ns(lines)) // NS_PER_MS
    with gzip.open(out, "wb") as sink:
        sink.write(b"\n".join(shift_lines(lines, delta_ms)) + b"\n")
    return delta_ms


def _spans(requests: list[Any]) -> Iterator[dict[str, Any]]:
    for request in requests:
        for resource in request.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                yield from scope.get("spans", [])


def _shift_times(span: dict[str, Any], delta_ms: int) -> None:
    for field in _TIME_FIELDS:
        if span.get(field):
            span[field] = str(int(span[field]) + delta_ms * NS_PER_MS)


def _shift_hlc(attributes: list[dict[str, Any]], delta_ms: int) -> None:
    """An HLC is (physical_ms << 16) | logical: a whole-ms shift moves the physical part only."""
    for attribute in attributes:
        if attribute.get("key") == contract.HLC and "intValue" in attribute.get("value", {}):
            packed = int(attribute["value"]["intValue"])
            attribute["value"]["intValue"] = str(packed + (delta_ms << contract.HLC_LOGICAL_BITS))
