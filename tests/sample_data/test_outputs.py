"""What `turnlens simulate` writes: OTLP JSON Lines the Collector's file exporter would write, the
labels file, the fast benchmark requests, and live OTLP/HTTP into a real `turnlens collect`."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from labels import UNTIERED, split_untiered
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from turnlens.sample_data import otlp_json
from turnlens.sample_data.bulk import build_templates, counted_requests, request_stream
from turnlens.sample_data.simulate import Simulation, to_request

from turnlens.cli import main

REPO = Path(__file__).resolve().parents[2]
TURNLENS = [sys.executable, "-m", "turnlens.cli"]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_otlp_json_has_hex_ids_and_64_bit_integers_as_strings() -> None:
    sim = Simulation(sessions=3, seed=4)
    spans = [span for batch in sim.batches() for span in batch]
    request = to_request(spans)
    doc = orjson.loads(otlp_json.encode_line(request))
    encoded = {
        (s["traceId"], s["spanId"]): s
        for rs in doc["resourceSpans"]
        for ss in rs["scopeSpans"]
        for s in ss["spans"]
    }
    assert len(encoded) == len(spans)
    for span in spans:
        out = encoded[(format(span.context.trace_id, "032x"), format(span.context.span_id, "016x"))]
        assert out["startTimeUnixNano"] == str(span.start_time)
        if span.parent is not None:
            assert out["parentSpanId"] == format(span.parent.span_id, "016x")
        hlc = [a["value"] for a in out["attributes"] if a["key"] == "turnlens.hlc"]
        if hlc:
            assert hlc == [{"intValue": str(span.attributes["turnlens.hlc"])}]
        for event, out_event in zip(span.events, out.get("events", []), strict=True):
            assert out_event["timeUnixNano"] == str(event.timestamp) and out_event["name"] == event.name
        for link, out_link in zip(span.links, out.get("links", []), strict=True):
            assert out_link["traceId"] == format(link.context.trace_id, "032x")


def test_simulate_writes_reproducible_jsonl_gz_and_labels(tmp_path: Path) -> None:
    paths = []
    for n in (1, 2):
        out, labels = tmp_path / f"s{n}.jsonl.gz", tmp_path / f"l{n}.json"
        argv = [
            "simulate",
            "--sessions",
            "12",
            "--seed",
            "9",
            "--out",
            str(out),
            "--labels",
            str(labels),
            "--quiet",
        ]
        assert main(argv) == 0
        paths.append((out, labels))
    (out, labels), (out2, labels2) = paths
    assert out.read_bytes() == out2.read_bytes() and labels.read_bytes() == labels2.read_bytes()
    lines = gzip.decompress(out.read_bytes()).splitlines()
    spans = [
        s
        for line in lines
        for rs in orjson.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for s in ss["spans"]
    ]
    document = json.loads(labels.read_text())
    assert document["format"] == "turnlens-labels/1" and document["seed"] == 9
    assert {"findings", "turns", "incidents", "scenarios", "kinds"} <= set(document)
    turn_ids = {
        a["value"]["stringValue"] for s in spans for a in s["attributes"] if a["key"] == "turnlens.turn.id"
    }
    assert {t["turn_id"] for t in document["turns"] if t["ordering"] == "hlc"} == turn_ids


def test_simulate_refuses_an_unknown_scenario_and_a_missing_destination(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--out", "/dev/null", "--scenarios", "nope"]) == 2
    assert main(["simulate"]) == 2
    assert "unknown scenario" in capsys.readouterr().err


def test_fast_requests_parse_and_every_copy_has_its_own_ids() -> None:
    templates = build_templates(spans_per_request=256, sessions=6, seed=3)
    per_copy = sum(t.spans for t in templates)
    requests = list(request_stream(per_copy * 3, templates=templates))
    assert len(requests) == 3 * len(templates)
    ids: Counter[bytes] = Counter()
    turns: set[str] = set()
    for data in requests:
        request = ExportTraceServiceRequest.FromString(data)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    ids[span.trace_id + span.span_id] += 1
                    turns.update(a.value.string_value for a in span.attributes if a.key == "turnlens.turn.id")
    assert sum(ids.values()) == per_copy * 3 and max(ids.values()) == 1
    assert sum(n for _, n in counted_requests(per_copy * 2, templates=templates)) == per_copy * 2
    first = {a for a in turns if a.startswith("turn-00000001")}
    assert len(first) * 3 == len(turns)


@pytest.mark.slow
def test_live_otlp_into_a_real_collector_arrives_whole(tmp_path: Path) -> None:
    """`turnlens simulate --endpoint` (the SDK's OTLPSpanExporter) into a real `turnlens collect`."""
    from turnlens.queries import catalog

    store, port = tmp_path / "store", _free_port()
    store.mkdir()
    (store / "tool_registry.toml").write_bytes((REPO / "sample_data" / "tool_registry.toml").read_bytes())
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    collector = subprocess.Popen(
        [*TURNLENS, "collect", "--store", str(store), "--http", f"127.0.0.1:{port}", "--grpc", "off"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        labels = tmp_path / "labels.json"
        sent = subprocess.run(
            [
                *TURNLENS,
                "simulate",
                "--sessions",
                "30",
                "--seed",
                "31",
                "--endpoint",
                f"http://127.0.0.1:{port}",
                "--labels",
                str(labels),
                "--quiet",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if sent.returncode != 0 and "Connection refused" in sent.stderr:
            pytest.fail(f"collector did not come up: {sent.stderr[-500:]}")
        assert sent.returncode == 0, sent.stderr[-2000:]
        spans_sent = int(sent.stderr.rsplit(" turns, ", 1)[1].split(" spans")[0])
        document = json.loads(labels.read_text())
        deadline, stored = time.monotonic() + 30, -1
        while time.monotonic() < deadline:
            if (store / "turnlens.duckdb").exists():
                with catalog.connect(store) as con:
                    stored = con.execute("select count(*) from spans").fetchone()[0]
                    if stored == spans_sent:
                        sessions = {
                            r[0] for r in con.execute("select distinct session_id from spans").fetchall()
                        }
                        break
            time.sleep(0.5)
        assert stored == spans_sent
        assert {t["session_id"] for t in document["turns"]} <= sessions
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(timeout=30)


@pytest.mark.slow
def test_the_detectors_find_exactly_the_labels(tmp_path: Path) -> None:
    """Imported through `turnlens ingest` with the fleet's tool registry, the store's `divergences`
    view reports every labelled finding and nothing else (precision and recall 100 %)."""
    from turnlens.queries import catalog

    out, labels, store = tmp_path / "mixed.jsonl.gz", tmp_path / "labels.json", tmp_path / "store"
    assert (
        main(
            [
                "simulate",
                "--sessions",
                "150",
                "--seed",
                "77",
                "--out",
                str(out),
                "--labels",
                str(labels),
                "--quiet",
            ]
        )
        == 0
    )
    store.mkdir()
    (store / "tool_registry.toml").write_bytes((REPO / "sample_data" / "tool_registry.toml").read_bytes())
    ingested = subprocess.run(
        [*TURNLENS, "ingest", "--store", str(store), "--quiet", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ingested.returncode == 0, ingested.stderr[-2000:]
    with catalog.connect(store) as con:
        rows = con.execute("select kind, session_id, turn_id, tool_call_id from divergences").fetchall()
    document = json.loads(labels.read_text())
    expected = Counter(
        (f["kind"], f["session_id"], f["turn_id"], f["tool_call_id"])
        for f in document["findings"]
        if f["kind"] != UNTIERED
    )
    found = Counter(tuple(row) for row in split_untiered(document, rows))
    assert {"false_positives": found - expected, "missed": expected - found} == {
        "false_positives": Counter(),
        "missed": Counter(),
    }
