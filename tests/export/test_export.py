"""`turnlens export` and export_incident: each format holds this incident's content and nothing of others."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from conftest_values import T0
from turnlens.export import report
from turnlens.queries.catalog import connect

OTHER_TURN = ("call-charge", "key-charge", "charge_card", "call-search", "key-search")


@pytest.fixture(scope="module")
def alerted(store: Path) -> Path:
    """The alert runner has evaluated the store a minute after the incident (as a scheduler would have)."""
    from turnlens.cli import main

    assert (
        main(
            [
                "alerts",
                "run",
                "--store",
                str(store),
                "--at",
                (T0 + timedelta(seconds=30)).isoformat(),
                "--notify",
                f"file:{store / 'pages.jsonl'}",
            ]
        )
        == 2
    )
    return store


def test_markdown_holds_the_turn_and_nothing_of_other_turns(alerted: Path) -> None:
    md = report.export_incident(alerted, session_id="s1", turn_id="t1", fmt="md")
    assert "turn t1 of session s1" in md
    assert (
        "| t1 | cancelled | cancelled | cancelled | succeeded | acknowledged |" in md
    )  # the five logs disagree
    assert "cancelled_but_committed" in md and "committed 250 ms after the cancel" in md
    assert "call-email" in md and "key-email" in md
    assert "CancelledButCommittedIrreversible" in md  # the page about this turn
    for other in OTHER_TURN:
        assert other not in md
    assert not re.search(r"\|\s*t[23]\s*\|", md)


def test_json_carries_the_same_sections_for_this_turn_only(alerted: Path) -> None:
    doc = json.loads(report.export_incident(alerted, session_id="s1", turn_id="t1", fmt="json"))
    sections = doc["sections"]
    assert set(sections) == set(report.SECTIONS)
    assert all("unavailable" not in s for s in sections.values()), {
        k: s.get("unavailable") for k, s in sections.items()
    }
    for key in ("summary", "verdicts", "timeline", "ledger", "findings", "events"):
        assert {row["turn_id"] for row in sections[key]["rows"]} == {"t1"}, key
    kinds = {row["kind"] for row in sections["findings"]["rows"]}
    assert "cancelled_but_committed" in kinds
    committed = next(r for r in sections["ledger"]["rows"] if r["tool_call_id"] == "call-email")
    assert committed["committed_hlc_text"].startswith("2026-01-01T12:00:00.250Z")
    seqs = [row["seq"] for row in sections["timeline"]["rows"]]
    assert seqs == sorted(seqs) == list(range(1, len(seqs) + 1))
    assert {a["alertname"] for a in doc["alerts"]} >= {"CancelledButCommittedIrreversible"}
    assert all(a["labels"].get("turn_id") in (None, "t1") for a in doc["alerts"])
    assert "call-charge" not in json.dumps(doc)
    skew = {row["node"]: row["max_skew_ms"] for row in sections["skew"]["rows"]}
    assert skew["tool-1"] == pytest.approx(40, abs=1)  # the tool node's wall clock ran 40 ms behind its HLC


def test_a_session_holds_its_turns_and_a_time_range_its_turns(alerted: Path) -> None:
    session = json.loads(report.export_incident(alerted, session_id="s1", fmt="json"))
    assert [t["turn_id"] for t in session["turns"]] == ["t1", "t3"]
    con = connect(alerted)  # the dashboard passes its own read-only connection
    try:
        ranged = json.loads(
            report.export_incident(
                con, start=T0 - timedelta(seconds=10), end=T0 + timedelta(seconds=10), fmt="json"
            )
        )
    finally:
        con.close()
    assert [(t["session_id"], t["turn_id"]) for t in ranged["turns"]] == [("s1", "t1"), ("s2", "t2")]
    assert {r["turn_id"] for r in ranged["sections"]["findings"]["rows"]} == {"t1", "t2"}


def test_html_is_self_contained(alerted: Path) -> None:
    html = report.export_incident(alerted, session_id="s1", turn_id="t1", fmt="html")
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(http" not in html
    assert html.count("<svg") >= 1  # the swimlane, inline
    assert 'id="verdict-matrix"' in html and 'id="timeline"' in html and 'id="raw-events"' in html


def test_export_command(turnlens, alerted: Path, tmp_path: Path) -> None:
    out = tmp_path / "incident.md"
    code, _, err = turnlens("export", "--store", alerted, "--session", "s1", "--turn", "t1", "--out", out)
    assert code == 0, err
    assert out.read_text().startswith("# turnlens incident report")
    code, _, err = turnlens(
        "export", "--store", alerted, "--session", "nobody", "--format", "json", "--out", "-"
    )
    assert code == 1 and "no turn" in err
    assert turnlens("export", "--store", alerted, "--out", out)[0] == 2  # no scope
    assert (
        turnlens("export", "--store", alerted, "--session", "s1", "--from", T0.isoformat(), "--out", out)[0]
        == 2
    )
    code, text, _ = turnlens(
        "export",
        "--store",
        alerted,
        "--from",
        (T0 - timedelta(seconds=10)).isoformat(),
        "--to",
        (T0 + timedelta(seconds=10)).isoformat(),
        "--format",
        "json",
        "--out",
        "-",
    )
    assert code == 0 and {t["turn_id"] for t in json.loads(text)["turns"]} == {"t1", "t2"}


def test_every_export_query_file_is_used_and_every_section_is_a_turn_query() -> None:
    from turnlens.export import gather
    from turnlens.queries import turn_queries

    present = {p.name for p in gather.EXPORT_SQL.glob("*.sql")}
    assert {gather.SCOPE_SQL, gather.CATALOG_PATH_SQL} == present
    assert {name for _, name in gather.SECTIONS.values()} <= set(turn_queries.load())


def test_the_dashboards_hardened_cursor_exports_the_same_incident(alerted: Path) -> None:
    """The Turn page passes a cursor of its locked-down connection; the export must work through it."""
    from turnlens.dashboard.data import harden

    con = connect(alerted)
    harden(con, alerted)
    cursor = con.cursor()
    try:
        via_cursor = json.loads(report.export_incident(cursor, session_id="s1", turn_id="t1", fmt="json"))
    finally:
        cursor.close()
        con.close()
    via_dir = json.loads(report.export_incident(alerted, session_id="s1", turn_id="t1", fmt="json"))
    for doc in (via_cursor, via_dir):
        doc.pop("generated_at")
    for key, section in via_dir["sections"].items():
        assert via_cursor["sections"][key] == section, key
    assert via_cursor["alerts"]  # the alert history was found beside the catalog


def test_export_help_lists_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    from turnlens.cli import main

    with pytest.raises(SystemExit):
        main(["export", "--help"])
    out = capsys.readouterr().out
    for code, meaning in [
        ("0", "written"),
        ("1", "nothing in the store matches"),
        ("2", "bad arguments"),
        ("3", "the store cannot be read"),
    ]:
        assert re.search(rf"^\s+{code}\s+{meaning}", out, re.MULTILINE), (code, out)
