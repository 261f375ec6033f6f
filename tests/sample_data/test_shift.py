"""The demo's sample moved to now: every time and HLC shifted alike, so the incident reads as recorded."""

from __future__ import annotations

import gzip
import json
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from turnlens.dashboard import data
from turnlens.kernel import contract
from turnlens.queries import catalog
from turnlens.sample_data import shift

from turnlens import demo

SAMPLE = Path(demo.SAMPLE)


def _first_span(line: bytes) -> dict:
    return orjson.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]


def _hlc(span: dict) -> int:
    return next(int(a["value"]["intValue"]) for a in span["attributes"] if a["key"] == contract.HLC)


def test_a_shift_moves_times_and_hlc_physical_part_alike() -> None:
    with gzip.open(SAMPLE, "rb") as source:
        line = source.readline()
    [moved] = shift.shift_lines([line], 1000)
    before, after = _first_span(line), _first_span(moved)
    assert int(after["startTimeUnixNano"]) - int(before["startTimeUnixNano"]) == 1000 * shift.NS_PER_MS
    assert int(after["endTimeUnixNano"]) - int(before["endTimeUnixNano"]) == 1000 * shift.NS_PER_MS
    physical_before, logical_before = contract.unpack_hlc(_hlc(before))
    assert contract.unpack_hlc(_hlc(after)) == (physical_before + 1000, logical_before)


@pytest.mark.slow  # one ingest of the whole sample (~10 s)
def test_the_demo_loads_the_sample_ending_minutes_ago_with_its_findings(tmp_path: Path) -> None:
    demo.copy_registry(tmp_path)
    demo.load_sample(tmp_path)
    con = catalog.connect(tmp_path)
    try:
        newest_ms = int(data.run_named(con, "store_bounds", {})["newest_ms"].iloc[0])
        kinds = dict(con.execute("select kind, count(*) from divergences group by kind").fetchall())
    finally:
        con.close()
    assert 0 < time.time() * 1000 - newest_ms < 10 * 60 * 1000, "the sample does not end a few minutes ago"
    # as recorded: the shift changes no finding, of any kind
    labels = json.loads(SAMPLE.with_name("sample_labels.json").read_text())
    assert kinds == Counter(finding["kind"] for finding in labels["findings"])
    assert not list(tmp_path.glob(".sample-now*")), "the shifted copy was left in the store"
