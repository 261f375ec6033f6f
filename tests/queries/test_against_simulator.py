"""Precision and recall of every detector against the simulator's ground truth: the fleet's spans go through
the real OTLP JSON export and `turnlens ingest`, and divergences must equal the labels exactly."""

from __future__ import annotations

import collections
import json
import os
import shutil
from pathlib import Path

import pytest
from labels import UNTIERED, split_untiered
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog

from turnlens.cli import main

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"
# 500 sessions of seed 23 hold every scenario (15+ turns each) and every kind (15+ findings each), which the
# test checks; TURNLENS_PR_SESSIONS plays a larger fleet
SESSIONS = int(os.environ.get("TURNLENS_PR_SESSIONS", "500"))


@pytest.mark.slow
def test_divergences_equal_the_simulator_labels(tmp_path: Path) -> None:
    jsonl, labels_path, store = tmp_path / "fleet.jsonl.gz", tmp_path / "labels.json", tmp_path / "store"
    assert (
        main(
            [
                "simulate",
                "--sessions",
                str(SESSIONS),
                "--seed",
                "23",
                "--out",
                str(jsonl),
                "--labels",
                str(labels_path),
                "--quiet",
            ]
        )
        == 0
    )
    store.mkdir()
    shutil.copy(SAMPLE_DATA / "tool_registry.toml", store / "tool_registry.toml")
    assert main(["ingest", "--store", str(store), "--quiet", str(jsonl)]) == 0
    catalog.write_catalog(store, segments_glob(store))
    labels = json.loads(labels_path.read_text())
    assert {turn["scenario"] for turn in labels["turns"]} == set(labels["scenarios"]), "every scenario plays"

    with catalog.connect(store) as con:
        found = con.execute(
            "select kind, session_id, turn_id, tool_call_id, idempotency_key from divergences"
        ).fetchall()
        turns = {
            (s, t): (o, st)
            for s, t, o, st in con.execute(
                "select session_id, turn_id, ordering, status from turns"
            ).fetchall()
        }

    expected = collections.Counter(
        (f["kind"], f["session_id"], f["turn_id"], f.get("tool_call_id"), f.get("idempotency_key"))
        for f in labels["findings"]
        if f["kind"] != UNTIERED
    )
    got = collections.Counter(tuple(row) for row in split_untiered(labels, found))
    false_positives = sorted((got - expected).elements())
    false_negatives = sorted((expected - got).elements())
    assert (false_positives, false_negatives) == ([], [])
    assert {kind for kind, *_ in found} == set(labels["kinds"]), "every labelled kind must occur in the mix"

    # every labelled turn is a turn of the view, ordered as the labels say, cancelled when they say so
    for turn in labels["turns"]:
        ordering, status = turns[(turn["session_id"], turn["turn_id"])]
        assert ordering == turn["ordering"], turn
        assert (status == "cancelled") == turn["cancelled"], turn
