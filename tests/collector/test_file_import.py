"""`turnlens ingest` via the CLI: the file exporter's JSON Lines, single requests, gzip, bad lines."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import otlp_samples as s
import pytest

from turnlens import cli


def write_jsonl(path: Path, requests: list[dict], *, compress: bool = False) -> Path:
    text = b"".join(orjson.dumps(request) + b"\n" for request in requests)
    path.write_bytes(gzip.compress(text) if compress else text)
    return path


def test_ingest_imports_jsonl_gz_and_a_pretty_printed_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    lines = [s.to_otlp_json(s.simple_request(10, seed=i)) for i in range(1, 4)]
    jsonl = write_jsonl(tmp_path / "traces.jsonl", lines)
    gz = write_jsonl(tmp_path / "more.jsonl.gz", [s.to_otlp_json(s.simple_request(5, seed=9))], compress=True)
    single = tmp_path / "one.json"
    single.write_text(json.dumps(json.loads(s.SPEC_EXAMPLE_JSON), indent=2))
    assert cli.main(["ingest", "--store", str(store), "--quiet", str(jsonl), str(gz), str(single)]) == 0
    summary = capsys.readouterr().out
    assert "3 file(s), 5 request(s): 36 spans stored, 0 rejected" in summary
    assert s.query(store, "select count(*) from spans") == [(36,)]
    spec_span = s.query(store, "select name from spans where span_id = 'eee19b7ec3c1b174'")
    assert spec_span == [("I'm a server span",)]


def test_ingest_reports_rejected_spans_and_unreadable_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    good = s.to_otlp_json(s.simple_request(4, seed=1))
    bad_span = s.to_otlp_json(s.simple_request(2, seed=2))
    bad_span["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "abc"
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(
        orjson.dumps(good) + b"\n" + b"{this is not json\n" + orjson.dumps(bad_span) + b"\n"
        + b'{"resourceSpans": 7}\n'
    )
    assert cli.main(["ingest", "--store", str(store), "--quiet", str(path)]) == 0
    summary = capsys.readouterr().out
    assert "5 spans stored, 1 rejected" in summary
    assert "1 × trace_id is not a hex string" in summary
    assert "2 unreadable request(s) skipped" in summary and "mixed.jsonl:2: not JSON" in summary
    assert s.query(store, "select count(*) from spans") == [(5,)]


def test_ingesting_the_same_file_twice_counts_spans_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    path = write_jsonl(tmp_path / "t.jsonl", [s.to_otlp_json(s.simple_request(7, seed=3))])
    for _ in range(2):
        assert cli.main(["ingest", "--store", str(store), "--quiet", str(path)]) == 0
    assert s.query(store, "select count(*) from spans") == [(7,)]


def test_a_missing_file_fails_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ingest", "--store", str(tmp_path / "store"), str(tmp_path / "nope.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("folder", ["run[1]", "team?", "all*"])
def test_a_store_folder_whose_path_is_a_pattern_is_refused_before_anything_is_written(
    tmp_path: Path, folder: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB reads every file path as a pattern: a store in `run[1]/` found none of its own segments (the
    catalogue failed with "No files found", a traceback), one in `team?/` would read `teamb/`'s too."""
    path = write_jsonl(tmp_path / "t.jsonl", [s.to_otlp_json(s.simple_request(3, seed=5))])
    store = tmp_path / folder
    assert cli.main(["ingest", "--store", str(store), "--quiet", str(path)]) == 2
    assert "cannot hold a store" in capsys.readouterr().err
    monkeypatch.setenv("TURNLENS_STORE", str(store))  # a store the collector is configured with
    assert cli.main(["ingest", "--quiet", str(path)]) == 2
    assert "cannot hold a store" in capsys.readouterr().err
    for command in (["materialize"], ["query", "select 1"], ["dashboard"], ["alerts", "run"]):
        assert cli.main([*command, "--store", str(store)]) == 2, command
        assert "Choose a folder whose path has no [, * or ?" in capsys.readouterr().err
    assert not store.exists()
