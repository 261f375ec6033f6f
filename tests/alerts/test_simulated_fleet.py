"""Shipped rules and export on the simulator's fleet, ingested by the collector: alerts match the labels."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from turnlens.export import report

pytestmark = pytest.mark.slow
SCENARIOS = ",".join(
    [
        "stop_after_eager_dispatch=2",
        "retry_key_ignored=2",
        "typing_cancel_during_commit=1",
        "clean_chat=2",
        "user_stops_stream=1",
    ]
)
FINDING_RULES = {
    "CancelledButCommittedIrreversible",
    "CancelledButCommitted",
    "DuplicateCommit",
    "EagerSideEffect",
    "UnapprovedSideEffect",
    "GhostCommit",
    "CancelNotPropagated",
    "DuplicateCompensation",
    "UnbilledSideEffect",
    "BilledNotCommitted",
    "TokensBilledAfterCancel",
    "MissingIdempotencyKey",
    "UntieredTool",
    "CausalInversion",
}


def turnlens(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "turnlens.cli", *map(str, args)], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    work = tmp_path_factory.mktemp("fleet")
    sim = turnlens(
        "simulate",
        "--sessions",
        24,
        "--seed",
        11,
        "--scenarios",
        SCENARIOS,
        "--out",
        work / "fleet.jsonl",
        "--labels",
        work / "labels.json",
        "--quiet",
    )
    assert sim.returncode == 0, sim.stderr
    ingest = turnlens("ingest", "--store", work / "store", work / "fleet.jsonl", "--quiet")
    assert ingest.returncode == 0, ingest.stderr
    return work / "store", json.loads((work / "labels.json").read_text())


def _at(ns: int, delta: timedelta = timedelta(0)) -> str:
    return (datetime.fromtimestamp(ns / 1e9, UTC) + delta).isoformat()


def test_finding_alerts_are_exactly_the_labelled_findings(fleet: tuple[Path, dict], tmp_path: Path) -> None:
    store, labels = fleet
    before = turnlens(
        "alerts",
        "run",
        "--store",
        store,
        "--state",
        tmp_path / "s.json",
        "--at",
        _at(labels["start_unix_nano"], -timedelta(minutes=1)),
    )
    assert (before.returncode, before.stdout) == (0, "")  # replayed before the fleet started: nothing

    after = turnlens(
        "alerts",
        "run",
        "--store",
        store,
        "--state",
        tmp_path / "s.json",
        "--at",
        _at(labels["end_unix_nano"], timedelta(minutes=1)),
    )
    assert after.returncode == 2, after.stderr  # irreversible commits after a stop and duplicate commits page
    pages = [json.loads(line) for line in after.stdout.splitlines()]
    findings = [p for p in pages if p["labels"]["alertname"] in FINDING_RULES]
    # one page per rule and tool (or kind), counting its findings: as many as the labels, no more
    counted: Counter[str] = Counter()
    for page in findings:
        counted[page["labels"]["kind"]] += int(page["annotations"]["count"])
    assert counted == Counter(f["kind"] for f in labels["findings"])
    groups = [(p["labels"]["alertname"], p["labels"].get("tool_name")) for p in findings]
    assert len(groups) == len(set(groups)) < len(labels["findings"])
    labelled_turns = {(f["kind"], f["session_id"], f["turn_id"]) for f in labels["findings"]}
    for page in findings:  # the examples link to turns that really have the finding
        for url in re.findall(r"\S+/turn\?\S+", page["annotations"]["examples"]):
            query = parse_qs(urlsplit(url).query)
            assert (page["labels"]["kind"], query["session"][0], query["turn"][0]) in labelled_turns
    critical = {p["labels"]["alertname"] for p in pages if p["labels"]["severity"] == "critical"}
    assert {"CancelledButCommittedIrreversible", "DuplicateCommit"} <= critical
    assert all(p["annotations"]["evidence"] for p in pages if p["labels"]["alertname"] in FINDING_RULES)


def test_export_of_a_labelled_turn_holds_its_findings_only(fleet: tuple[Path, dict]) -> None:
    store, labels = fleet
    finding = next(f for f in labels["findings"] if f["kind"] == "duplicate_commit")
    own = {
        (f["kind"], f.get("idempotency_key"))
        for f in labels["findings"]
        if (f["session_id"], f["turn_id"]) == (finding["session_id"], finding["turn_id"])
    }
    doc = json.loads(
        report.export_incident(
            store, session_id=finding["session_id"], turn_id=finding["turn_id"], fmt="json"
        )
    )
    rows = doc["sections"]["findings"]["rows"]
    assert {(r["kind"], r["idempotency_key"]) for r in rows} == own
    md = report.export_incident(store, session_id=finding["session_id"], turn_id=finding["turn_id"], fmt="md")
    assert finding["idempotency_key"] in md and "duplicate_commit" in md
    others = {f["session_id"] for f in labels["findings"]} - {finding["session_id"]}
    assert others and not any(session in md for session in others)
