"""`turnlens compact` via the CLI: small segments merged, the same spans counted, old days dropped."""

from __future__ import annotations

import time
from pathlib import Path

import otlp_samples as s
import pytest
from turnlens.collector.otlp_decode import decode_protobuf
from turnlens.collector.store import Store
from turnlens.queries.catalog import write_catalog

from turnlens import cli


def segment_files(store: Path) -> list[Path]:
    return [p for p in (store / "segments").glob("date=*/*.parquet") if p.name != "empty.parquet"]


def test_compact_merges_small_segments_and_keeps_every_span(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    with Store(store) as writer:
        write_catalog(store, writer.segments_glob)
        for seed in range(1, 11):  # ten appends, ten small segments
            writer.append(decode_protobuf(s.simple_request(20, seed=seed).SerializeToString()).table)
    assert len(segment_files(store)) == 10
    assert cli.main(["compact", "--store", str(store)]) == 0
    assert "merged_segments=1" in capsys.readouterr().out
    assert s.query(store, "select count(*) from spans") == [(200,)]


def test_retention_drops_old_partitions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    with Store(store) as writer:
        write_catalog(store, writer.segments_glob)
        three_days_ago = time.time_ns() - 3 * 86_400 * 10**9  # partitions are days of receipt
        body = s.simple_request(5, seed=1).SerializeToString()
        writer.append(decode_protobuf(body, received_unix_nano=three_days_ago).table)
    assert cli.main(["compact", "--store", str(store), "--retention", "1d"]) == 0
    assert "dropped 1 date partition" in capsys.readouterr().out


def test_compact_refuses_a_directory_that_is_not_a_store(tmp_path: Path) -> None:
    assert cli.main(["compact", "--store", str(tmp_path)]) == 2
