"""The read-side fuzzer (bench/fuzz_values.py) for a small seeded campaign against a real `turnlens collect`.

`make fuzz` runs a longer one; here the same generator keeps its criteria in every test run: valid OTLP whose
values are hostile is acknowledged, and afterwards the materialiser, every view, the dashboard's queries, turn
pages, exports and the alert rules all work on what was stored, and the refreshes equal the live views.
"""

from __future__ import annotations

import random
from pathlib import Path

import benchscripts
import pytest
from turnlens.kernel import contract as c

INT64_MAX = 2**63 - 1


@pytest.mark.slow
def test_hostile_values_through_a_real_collector_leave_every_read_working(tmp_path: Path) -> None:
    """A seeded campaign: the collector answers; a full build and refreshes beside it, the views, the
    dashboard's queries, turn pages, exports and the alert rules all work on what it stored; and the
    derived state the refreshes left equals the live views (a failure of the fuzzer's own if not)."""
    fuzz = benchscripts.load("fuzz_values")
    store = tmp_path / "store"
    summary = fuzz.run(30, seed=20261206, store=store, refreshes=3, sample_turns=25, exports=3)
    report = summary.to_json()
    assert summary.failures == [], report
    assert summary.collector_exit == 0 and set(summary.answers) == {"200"}, report
    assert summary.refreshes == 3 and summary.turns_read == 25, report
    assert summary.spans > 500 and summary.turns > 100, report


def test_the_fuzzer_reaches_the_hostile_values(tmp_path: Path) -> None:
    """The generator does send what the tests above are about: an HLC of 2^63-1, cut-off JSON text, times
    at 0 and past the span's end, a parent cycle."""
    fuzz = benchscripts.load("fuzz_values")
    rng = random.Random(20261206)
    spans = [
        span
        for serial in range(100)  # enough that the vocabulary's size does not decide what a seed reaches
        for resource in fuzz.hostile_request(rng, serial)["resourceSpans"]
        for span in resource["scopeSpans"][0]["spans"]
    ]
    values = {
        kv["value"].get("intValue") or kv["value"].get("stringValue")
        for span in spans
        for kv in span["attributes"]
        if kv["key"] == c.HLC
    }
    assert str(INT64_MAX) in values and "[" in values
    assert any(e["timeUnixNano"] == "0" for span in spans for e in span["events"])
    assert any(span.get("parentSpanId") == span["spanId"] for span in spans)
