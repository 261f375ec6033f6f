"""The kernel's definitions agree with the SQL that uses the same values, and its parsers read what
users type."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from turnlens.kernel import contract, durations, findings

REPO = Path(__file__).resolve().parents[2]


def test_finding_kinds_are_the_kinds_the_divergences_view_reports_and_documents() -> None:
    sql = (REPO / "queries" / "views" / "divergences.sql").read_text()
    computed = re.findall(r"'([a-z_]+)' as kind", sql)
    documented = re.search(r"--\s+kind: (.*)\.", sql)
    assert documented, "the divergences view no longer documents its kinds"
    assert sorted(set(computed)) == sorted(findings.FINDING_KINDS)
    assert [k.strip() for k in documented.group(1).split(",")] == list(findings.FINDING_KINDS)
    assert set(findings.SIDE_EFFECT_KINDS) <= set(findings.FINDING_KINDS)


def test_the_p99_page_threshold_is_the_one_the_alert_rule_pages_on() -> None:
    rule = (REPO / "alerts" / "rules" / "cancel_to_ack_p99.sql").read_text()
    threshold = re.search(r"quantile_cont\(latency_ms, 0\.99\) > (\d+)", rule)
    assert threshold and float(threshold.group(1)) == findings.CANCEL_TO_ACK_P99_PAGE_MS


def test_an_hlc_reads_as_utc_time_then_its_logical_counter() -> None:
    moment = datetime(2026, 1, 1, 12, 0, 0, 123_000, tzinfo=UTC)
    packed = contract.pack_hlc(int(moment.timestamp() * 1000), 3)
    assert contract.format_hlc(packed) == "2026-01-01T12:00:00.123Z+3"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 2_592_000), ("12h", 43_200), ("90s", 90), ("15m", 900), ("1h30m", 5_400), ("2w", 1_209_600),
     ("250ms", 0.25), ("45", 45), (" 1.5h ", 5_400), ("0s", 0)],
)
def test_a_duration_reads_the_same_as_seconds_and_as_a_timedelta(text: str, seconds: float) -> None:
    assert durations.parse_seconds(text) == pytest.approx(seconds)
    assert durations.parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "d", "3x", "30 days", "-5d", "1h junk", "5m!"])
def test_a_duration_it_cannot_read_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        durations.parse_seconds(text)


@pytest.mark.parametrize(("delta", "text"), [(timedelta(hours=2), "2h"), (timedelta(minutes=5), "5m"),
                                            (timedelta(seconds=90), "90s"), (timedelta(0), "0s")])
def test_format_duration_gives_back_what_parse_duration_reads(delta: timedelta, text: str) -> None:
    assert durations.format_duration(delta) == text
    assert durations.parse_duration(text) == delta


def test_a_time_without_an_offset_is_utc() -> None:
    assert durations.parse_time("2026-01-01T12:00:00") == datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert durations.parse_time("2026-01-01T13:00:00+01:00") == datetime(2026, 1, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("attributes", "layer"),
    [
        ({"gen_ai.operation.name": "invoke_workflow"}, "runtime"),  # ADK's root span of a run
        ({"gen_ai.operation.name": "generate_content"}, "runtime"),
        ({"gen_ai.operation.name": "execute_tool"}, "tool"),
        ({"gen_ai.operation.name": ["chat"]}, None),  # a list where a string belongs: no layer, no error
        ({"gen_ai.operation.name": {"k": 1}}, None),
    ],
)
def test_the_layer_a_genai_operation_gives(attributes: dict, layer: str | None) -> None:
    assert contract.infer_layer("internal", attributes) == layer
