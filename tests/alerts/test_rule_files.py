"""Shipped rule files load, carry runbooks, pass their own tests; `alerts test` catches wrong expectations."""

from __future__ import annotations

from pathlib import Path

import pytest
from turnlens.alerts import alerting
from turnlens.queries.catalog import QUERIES_DIR

TESTS = sorted((alerting.ALERTS_DIR / "tests").glob("*.test.toml"))


def test_every_shipped_rule_loads_with_a_runbook_and_a_severity() -> None:
    rules = alerting.load_rules()
    assert len(rules) >= 20
    for rule in rules:
        assert rule.severity in alerting.SEVERITIES
        assert rule.labels.get("priority") in {"P1", "P2", "P3"}, rule.path
        assert len(rule.runbook) > 40, rule.path
    critical = {r.name for r in rules if r.severity == "critical"}
    assert {"CancelToAckP99Lost", "CancelledButCommittedIrreversible", "DuplicateCommit"} <= critical
    assert next(r for r in rules if r.name == "CancelToAckP95Slow").labels["priority"] == "P2"


def test_the_rules_cover_every_finding_kind() -> None:
    kinds = {
        line.split("'")[1]
        for r in alerting.load_rules()
        for line in r.sql.splitlines()
        if line.strip().startswith("where d.kind =")
    }
    documented = (QUERIES_DIR / "views" / "divergences.sql").read_text()
    listed = next(line for line in documented.splitlines() if line.startswith("--   kind:"))
    expected = {k.strip(" .") for k in listed.split(":", 1)[1].split(",")}
    assert kinds == expected


@pytest.mark.parametrize("path", TESTS, ids=[p.name for p in TESTS])
def test_rule_test_file_passes(turnlens, path: Path) -> None:
    code, out, _ = turnlens("alerts", "test", path)
    assert code == 0, out
    assert "SUCCESS" in out


def test_a_wrong_expectation_fails(turnlens, tmp_path: Path) -> None:
    wrong = (alerting.ALERTS_DIR / "tests" / "cancel_to_ack_p99.test.toml").read_text()
    wrong = wrong.replace('rule = "../', f'rule = "{alerting.ALERTS_DIR}/').replace(
        "at = 2026-01-01T12:01:01Z\nfiring = [{}]", "at = 2026-01-01T12:01:01Z\npending = [{}]"
    )
    path = tmp_path / "wrong.test.toml"
    path.write_text(wrong)
    code, out, _ = turnlens("alerts", "test", path)
    assert code == 1
    assert (
        "FAILED" in out
        and "expected: ['alertname=CancelToAckP99Lost, priority=P1, severity=critical']" in out
    )


def test_a_wrong_count_of_a_grouped_alert_fails(turnlens, tmp_path: Path) -> None:
    wrong = (alerting.ALERTS_DIR / "tests" / "cancelled_but_committed.test.toml").read_text()
    wrong = wrong.replace('rule = "../', f'rule = "{alerting.ALERTS_DIR}/')
    wrong = wrong.replace('count = "2"', 'count = "3"')
    path = tmp_path / "wrong.test.toml"
    path.write_text(wrong)
    code, out, _ = turnlens("alerts", "test", path)
    assert code == 1
    assert "expected: {'count': '3'}" in out and "got:      {'count': '2'}" in out


def test_malformed_rules_are_refused(tmp_path: Path) -> None:
    good = (alerting.ALERTS_DIR / "duplicate_commit.sql").read_text()
    cases = {
        "no runbook": good.replace("-- runbook:", "-- notes:"),
        "bad for": good.replace("-- for: 0s", "-- for: soon"),
        "unknown parameter": good.replace("$at_hlc", "$when"),
        "reserved static label": good.replace("priority=P1", "severity=P1"),
    }
    messages = {
        "no runbook": "runbook",
        "bad for": "soon",
        "unknown parameter": "when",
        "reserved static label": "severity",
    }
    for why, text in cases.items():
        assert text != good, f"the case '{why}' no longer changes the rule"
        path = tmp_path / "rule.sql"
        path.write_text(text)
        with pytest.raises(alerting.RuleError, match=messages[why]):
            alerting.parse_rule(path)


def test_order_file_is_checked_both_ways(tmp_path: Path) -> None:
    (tmp_path / "a.sql").write_text((alerting.ALERTS_DIR / "duplicate_commit.sql").read_text())
    (tmp_path / "_order").write_text("")
    with pytest.raises(alerting.RuleError, match="does not list"):
        alerting.load_rules(tmp_path)
    (tmp_path / "_order").write_text("a.sql\nb.sql\n")
    with pytest.raises(alerting.RuleError, match="do not exist"):
        alerting.load_rules(tmp_path)
