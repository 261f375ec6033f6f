"""The receive-path fuzzer (bench/fuzz.py) for a few hundred cases against a real `turnlens collect`.

`make fuzz` runs many more; here the same generator keeps the criteria in every test run: no 500
(nor gRPC UNKNOWN / INTERNAL), the collector never dies, its memory stays bounded, and every span it
acknowledged is readable from the store afterwards.
"""

from __future__ import annotations

from pathlib import Path

import benchscripts
import pytest

CASES = 300


@pytest.mark.slow
def test_malformed_requests_get_4xx_and_lose_nothing_acknowledged(tmp_path: Path) -> None:
    fuzz = benchscripts.load("fuzz")
    summary = fuzz.run(CASES, seed=20261130, store=tmp_path / "store", workers=4)
    report = summary.to_json()
    assert summary.cases == CASES, report
    assert summary.server_errors == 0, report
    assert summary.crashes == 0, report
    assert summary.missing_spans == 0, report
    assert summary.acknowledged_spans > 100, report  # valid and half-valid requests were stored
    assert summary.peak_rss_mib < 600, report
    assert not [status for status in summary.answers if status.startswith("no answer")], report
    for family in ("protobuf", "grpc", "json", "framing", "gzip"):
        refused = [status for status in summary.by_family[family] if status not in ("200", "grpc:OK")]
        assert refused, (family, report)  # each family's breakage was noticed, not waved through
