"""The recorded sample's incident through `turnlens alerts run` and the dashboard at one "now".

The sample (sample_data/) was recorded on 2026-01-01 with a chaos window that slows every cancel chain
(its labels list it under `incidents`). Replayed through it, every alert pages once, the incident's SLO
rules page exactly once each, and findings page grouped; the dashboard, as of the same time, shows the
same rules firing the runner reported.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import payload_schemas
import pytest
import samplestore
from streamlit.testing.v1 import AppTest
from turnlens.dashboard import data

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
LABELS = json.loads((REPO / "sample_data" / "sample_labels.json").read_text())
APP = REPO / "dashboard" / "app.py"


def _iso(ns: int, delta: timedelta = timedelta(0)) -> str:
    return (datetime.fromtimestamp(ns / 1e9, UTC) + delta).isoformat().replace("+00:00", "Z")


@pytest.fixture(scope="module")
def recorded(ingested_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded sample, as recorded, through the real `turnlens ingest`, with the fleet's registry (a
    copy of the session's ingested sample: the alert runs below leave their state in it)."""
    return samplestore.copy_store(ingested_sample, tmp_path_factory.mktemp("recorded") / "store")


def _records(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_the_recorded_incident_pages_once_per_alert_and_the_dashboard_agrees(
    turnlens, recorded: Path, receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    (incident,) = [i for i in LABELS["incidents"] if i["name"] == "cancel_chain_delay"]
    hook = ["--notify", f"webhook:{receiver.url}/hook", "--notify", "stdout"]
    # through the incident, three minutes a step, then once more as of the recording's own "now"
    code, replayed, err = turnlens(
        "alerts", "run", "--store", recorded, "--every", "3m", *hook,
        "--at", _iso(incident["start_unix_nano"]),
        "--until", _iso(incident["end_unix_nano"], timedelta(minutes=6)),
    )  # fmt: skip
    assert code in (1, 2), err
    code, latest, err = turnlens("alerts", "run", "--store", recorded, "--at", "newest", *hook)
    assert code in (1, 2), err
    assert "(as of the newest data in the store)" in err
    # one "newest": the run ended where the named query `turnlens query store_bounds` (the dashboard's) says
    code, bounds, query_err = turnlens("query", "--store", recorded, "store_bounds", "--format", "json")
    assert code == 0, query_err
    newest_at = datetime.fromtimestamp(json.loads(bounds)[0]["newest_ms"] / 1000, UTC)
    assert f"turnlens alerts {newest_at.isoformat(timespec='milliseconds')[:-6]}Z (as of the newest" in err
    records = _records(replayed) + _records(latest)

    firing = [r for r in records if r["status"] == "firing"]
    assert len({r["fingerprint"] for r in firing}) == len(firing), "an alert paged twice"
    pages = Counter(r["labels"]["alertname"] for r in firing)
    assert pages["CancelToAckP99Lost"] == 1 and pages["CancelToAckP95Slow"] == 1  # the incident's SLO rules
    kinds = {f["kind"] for f in LABELS["findings"]}
    assert kinds <= {r["labels"].get("kind") for r in firing}  # every finding kind the sample has paged
    findings_pages = [r for r in firing if "kind" in r["labels"]]
    assert len(findings_pages) * 5 < len(LABELS["findings"])  # grouped: not one page per finding
    assert sum(int(r["annotations"]["count"]) for r in findings_pages) >= len(findings_pages)
    assert all(r["annotations"]["turn_url"].startswith("http://127.0.0.1:8501/turn?") for r in findings_pages)

    hooks = receiver.bodies("/hook")  # one POST per rule and run, carrying exactly what was news
    for body in hooks:
        jsonschema.validate(body, payload_schemas.WEBHOOK_V4)
    assert sorted(a["fingerprint"] + a["status"] for h in hooks for a in h["alerts"]) == sorted(
        r["fingerprint"] + r["status"] for r in records
    )

    last: dict[str, dict] = {}
    for record in records:
        last[record["fingerprint"]] = record
    firing_now = {r["labels"]["alertname"] for r in last.values() if r["status"] == "firing"}
    assert {"CancelToAckP95Slow", "CancelledButCommittedIrreversible", "DuplicateCommit"} <= firing_now

    # the dashboard, as of the same "now", lists the rules the runner says fire, and sees no disagreement
    monkeypatch.setenv(data.STORE_ENV, str(recorded))
    data.settings.cache_clear()
    try:
        page = AppTest.from_file(str(APP), default_timeout=120)
        page.query_params["asof"] = "newest"
        page.run()
        page.switch_page("pages/alerts.py").run()
        assert not page.exception, page.exception
        alerts = page.dataframe[0].value
        assert set(alerts[alerts["state"] == "firing"]["alert"]) == firing_now
        assert not [w for w in page.warning if "were evaluated" in str(w.value)]
        newest = datetime.fromtimestamp(LABELS["end_unix_nano"] / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")
        assert any(f"As of {newest}" in str(c.value) for c in page.caption)

        wall = AppTest.from_file(str(APP), default_timeout=120)  # the wall clock: months after the recording
        wall.run()
        wall.switch_page("pages/alerts.py").run()
        assert [w for w in wall.warning if "were evaluated" in str(w.value)]
    finally:
        data.settings.cache_clear()
