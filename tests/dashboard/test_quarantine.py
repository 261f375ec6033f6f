"""One unreadable segment in a real store: it is moved aside, and every reader keeps working without it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest
from turnlens.collector import quarantine

from . import storefixture

TURNLENS = Path(sys.executable).with_name("turnlens")
APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


def _turnlens(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TURNLENS), *args], capture_output=True, text=True, timeout=180)


def _truncate_a_copy(store: Path) -> Path:
    """A segment cut short as a full disk or a dying host leaves one: its footer is gone."""
    good = next(p for p in (store / "segments").rglob("*.parquet") if "1970" not in str(p))
    broken = good.with_name("truncated.parquet")
    broken.write_bytes(good.read_bytes()[:3000])
    return broken


@pytest.fixture()
def broken_store(store: Path, tmp_path: Path) -> tuple[Path, Path]:
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    rebuilt = _turnlens("views", "--store", str(copy), "--rebuild")  # its catalog names its own segments
    assert rebuilt.returncode == 0, rebuilt.stderr
    return copy, _truncate_a_copy(copy)


def _moved(store: Path, broken: Path) -> None:
    assert not broken.exists()
    kept = store / quarantine.QUARANTINE_DIR / broken.relative_to(store / "segments")
    assert kept.is_file() and kept.stat().st_size == 3000  # kept as it was, for forensics
    records = [
        json.loads(line) for line in (store / "segments" / quarantine.LOG_FILE).read_text().splitlines()
    ]
    assert [r["segment"] for r in records] == [str(broken.relative_to(store / "segments"))]


def test_a_query_quarantines_the_segment_and_answers(broken_store: tuple[Path, Path], store: Path) -> None:
    copy, broken = broken_store
    run = _turnlens("query", "--store", str(copy), "select count(*) as n from spans", "--format", "json")
    assert run.returncode == 0, run.stderr
    expected = _turnlens(
        "query", "--store", str(store), "select count(*) as n from spans", "--format", "json"
    )
    assert json.loads(run.stdout) == json.loads(expected.stdout)
    assert "quarantined unreadable segment" in run.stderr
    _moved(copy, broken)
    listed = _turnlens("query", "--store", str(copy), "select segment, bytes from quarantined_segments")
    assert "truncated.parquet" in listed.stdout and "3000" in listed.stdout


def test_export_and_alerts_read_past_it(broken_store: tuple[Path, Path]) -> None:
    copy, broken = broken_store
    session_id, turn_id = storefixture.CANCELLED
    out = copy.parent / "incident.md"
    run = _turnlens(
        "export", "--store", str(copy), "--session", session_id, "--turn", turn_id, "--out", str(out)
    )
    assert run.returncode == 0, run.stderr
    assert "cancelled_but_committed" in out.read_text()
    _moved(copy, broken)
    again = _truncate_a_copy(copy)
    alerts = _turnlens(
        *("alerts", "run", "--store", str(copy), "--at", "2026-11-18T11:10:00Z"),
        *("--state", str(copy.parent / "state.json"), "--notify", f"file:{copy.parent / 'n.jsonl'}"),
    )
    assert alerts.returncode in (1, 2), alerts.stderr  # warnings/criticals firing; 3 would be a rule error
    assert "Error" not in alerts.stderr
    assert not again.exists()


def test_materialize_and_the_catalog_carry_on(broken_store: tuple[Path, Path]) -> None:
    copy, broken = broken_store
    run = _turnlens("materialize", "--store", str(copy), "--margin", "0", "--quiet")
    assert run.returncode == 0, run.stderr
    _moved(copy, broken)
    again = _truncate_a_copy(copy)
    rebuilt = _turnlens("views", "--store", str(copy), "--rebuild")  # binding reads one footer: it carries on
    assert rebuilt.returncode == 0, rebuilt.stderr
    read = _turnlens("query", "--store", str(copy), "select count(*) from spans")  # the next read moves it
    assert read.returncode == 0, read.stderr
    assert not again.exists()


def test_compaction_sweeps_before_it_merges(broken_store: tuple[Path, Path]) -> None:
    copy, broken = broken_store
    run = _turnlens("compact", "--store", str(copy))
    assert run.returncode == 0, run.stderr
    _moved(copy, broken)


def test_turn_detail_and_overview_work_and_say_so(broken_store: tuple[Path, Path], on_store) -> None:
    copy, broken = broken_store
    on_store(copy)
    session_id, turn_id = storefixture.CANCELLED
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update({"session": session_id, "turn": turn_id})
    at.run()
    assert not at.exception, at.exception
    assert any("quarantined" in w.value for w in at.warning), [w.value for w in at.warning]
    at.switch_page("pages/turn_detail.py").run()
    assert not at.exception, at.exception
    assert "cancelled_but_committed" in "\n".join(e.value for e in at.error)
    _moved(copy, broken)


def test_a_parquet_file_of_other_columns_is_moved_aside_and_one_of_the_same_columns_is_read(
    store: Path, tmp_path: Path
) -> None:
    """The views read the segments without unifying their schemas: columns are matched by name against the
    first file's. A file of another program's columns dropped into segments/ would fail every read, so the
    read moves it aside and answers; a segment whose columns are the schema's in another order is read."""
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    assert _turnlens("views", "--store", str(copy), "--rebuild").returncode == 0
    count = "select count(*) as n, count(distinct trace_id) as traces from spans"
    expected = json.loads(_turnlens("query", "--store", str(store), count, "--format", "json").stdout)
    good = next(p for p in (copy / "segments").rglob("*.parquet") if "1970" not in str(p))
    table = pq.read_table(good)
    reordered = good.with_name("reordered.parquet")  # the same spans again, as a retried export stores them
    pq.write_table(table.select(list(reversed(table.column_names))), reordered)
    foreign = good.with_name("foreign.parquet")
    pq.write_table(pa.table({"trace_id": ["f" * 32], "note": ["not a span"]}), foreign)

    run = _turnlens("query", "--store", str(copy), count, "--format", "json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == expected
    assert reordered.exists() and not foreign.exists()
    log = (copy / "segments" / quarantine.LOG_FILE).read_text()
    [record] = [json.loads(line) for line in log.splitlines()]
    assert record["segment"] == str(foreign.relative_to(copy / "segments"))
    assert "lacks span_id" in record["reason"] and "has note" in record["reason"]
