"""Housekeeping of a store: what killed runs leave behind is removed, a wrong --store gets one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from turnlens.queries import catalog

TURNLENS = Path(sys.executable).with_name("turnlens")
SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "sample.jsonl.gz"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temporary_catalogs_of_killed_runs_are_removed(tmp_path: Path) -> None:
    glob = str(tmp_path / "segments" / "*" / "*.parquet")
    (tmp_path / "segments" / "date=1970-01-01").mkdir(parents=True)
    from turnlens.collector import segments

    segments.ensure_layout(tmp_path / "segments")
    dead = _dead_pid()
    left = [tmp_path / f".turnlens.duckdb.{dead}.tmp", tmp_path / f".turnlens.duckdb.{dead}.tmp.wal"]
    live = tmp_path / f".turnlens.duckdb.{os.getppid()}.tmp"  # a catalog another live process is writing
    for path in [*left, live]:
        path.write_bytes(b"x" * 1000)
    catalog.write_catalog(tmp_path, glob)
    assert not any(path.exists() for path in left)
    assert live.exists()
    assert (tmp_path / catalog.CATALOG_FILE).is_file()


def test_a_temporary_catalog_of_another_machine_is_left_until_it_is_an_hour_old(tmp_path: Path) -> None:
    """On a shared store the pid in a temporary catalogue's name may belong to another machine, where this one
    cannot see whether its writer lives: it is removed only once abandoned for an hour."""
    glob = str(tmp_path / "segments" / "*" / "*.parquet")
    from turnlens.collector import segments

    segments.ensure_layout(tmp_path / "segments")
    dead = _dead_pid()  # not running here, but perhaps over there
    writing = tmp_path / f".turnlens.duckdb.other-machine.{dead}.tmp"
    abandoned = tmp_path / f".turnlens.duckdb.other-machine.{dead + 1}.tmp"
    for path in (writing, abandoned):
        path.write_bytes(b"x" * 1000)
    hours_ago = time.time() - 2 * 3600
    os.utime(abandoned, (hours_ago, hours_ago))
    catalog.write_catalog(tmp_path, glob)
    assert writing.exists()
    assert not abandoned.exists()


@pytest.mark.parametrize("command", ["ingest", "materialize"])
def test_a_store_path_that_is_a_file_gets_one_line_and_exit_2(tmp_path: Path, command: str) -> None:
    not_a_folder = tmp_path / "store"
    not_a_folder.write_text("I am a file")
    args = [str(TURNLENS), command, "--store", str(not_a_folder)] + (
        [str(SAMPLE)] if command == "ingest" else []
    )
    run = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and str(not_a_folder) in run.stderr
    assert not_a_folder.read_text() == "I am a file"
