"""A loop's fold on a thread beside its refreshes (materialize.FoldBeside) leaves the live views' state.

The fold rewrites the partitions of one published manifest's deltas while refreshes go on writing deltas; a
later refresh merges it. The state must equal the live views whatever the refreshes wrote meanwhile (late
spans of a turn the fold rewrote), a fold whose partitions another run rewrote first must be dropped, a second
loop on the store must not fold the same deltas meanwhile, and a loop killed or stopped while it folds must
leave no file behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from stagedstore import MINUTE_MS, T0_MS, StagedStore, received_ns, shifted
from turnlens.queries import manifest as derived_manifest
from turnlens.queries import materialize

pytestmark = pytest.mark.slow  # each test runs several materialiser passes


def _beside(staged: StagedStore) -> materialize.FoldBeside:
    """A loop's fold beside its refreshes, as `turnlens materialize --every` makes it."""
    return materialize.FoldBeside(staged.dir, staged.glob, None, None)


def _fold_version_files(staged: StagedStore, version: int) -> list[Path]:
    return sorted((staged.dir / "derived").glob(f"*/p=*/v{version}.parquet"))


def _two_deltas_then_a_fold(staged: StagedStore, contract_turn: Any, beside: Any) -> list[dict]:
    """Two turns five minutes apart built, then two refreshes of late spans: the second starts a fold beside
    (more than one delta named). Returns the later turn's tool spans, not sent yet."""
    early = contract_turn(turn="early", key="k-early", trace="te", session="s-early", charged=False)
    late = shifted(contract_turn(turn="late", key="k-late", trace="tl", session="s-late"), 5 * MINUTE_MS)
    early_tools = [row for row in early if row["layer"] == "tool"]
    late_tools = [row for row in late if row["layer"] == "tool"]
    first_spans = [r for r in early if r not in early_tools] + [r for r in late if r not in late_tools]
    staged.send(first_spans, 6 * MINUTE_MS)
    assert staged.refresh(6 * MINUTE_MS + 1000, beside=beside, deltas_max=1)["mode"] == "full"
    staged.send(early_tools, at_ms=6 * MINUTE_MS + 2000)
    first = staged.refresh(6 * MINUTE_MS + 3000, beside=beside, deltas_max=1)
    assert first["fold_beside"] is None and first["deltas"] == 1
    staged.send(early, at_ms=6 * MINUTE_MS + 4000)  # an exporter retries the whole early turn
    second = staged.refresh(6 * MINUTE_MS + 5000, beside=beside, deltas_max=1)
    assert second["fold_beside"] == "started" and second["folded_partitions"] == []
    assert second["deltas"] == 2, "the deltas stay named until the fold is merged"
    staged.assert_equal_to_live()
    return late_tools


def test_a_fold_beside_is_merged_under_the_deltas_written_meanwhile(
    staged: StagedStore, contract_turn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    priorities: list[int] = []  # the CPU priority the fold's partitions were written at
    fold_files = materialize._fold_files

    def fold_files_noting_priority(run: Any, manifest: Any) -> list[str]:
        priorities.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return fold_files(run, manifest)

    monkeypatch.setattr(materialize, "_fold_files", fold_files_noting_priority)
    refreshes_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    beside = _beside(staged)
    late_tools = _two_deltas_then_a_fold(staged, contract_turn, beside)
    beside.wait()
    assert beside.error is None and beside.parts, "the early turn's partition was folded"
    # bulk work that may wait: the fold's thread yields the cores to the refreshes, which keep their priority
    assert priorities == [max(refreshes_nice, materialize.FOLD_NICE)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == refreshes_nice
    folded_version = beside.version

    # the later turn's tool spans arrive after the fold began: their delta is newer than the fold's input
    staged.send(late_tools, at_ms=6 * MINUTE_MS + 6000)
    merged = staged.refresh(6 * MINUTE_MS + 7000, beside=beside, deltas_max=1)
    assert merged["folded_partitions"] == beside.parts and merged["fold_beside_cpu_seconds"] > 0
    assert merged["deltas"] == 1, "the folded deltas left the manifest, the new one stays"
    assert merged["version"] > folded_version, "the refreshes skip the fold's version"
    manifest = derived_manifest.current_snapshot(staged.dir)
    assert manifest is not None
    assert {manifest.partitions[part] for part in beside.parts} == {folded_version}
    assert not beside.marker.exists()
    staged.assert_equal_to_live()
    assert "unbilled_side_effect" in staged.kinds("early"), "the retried turn still has its finding"


def test_a_fold_whose_partitions_another_run_rewrote_is_dropped(
    staged: StagedStore, contract_turn: Any
) -> None:
    beside = _beside(staged)
    _two_deltas_then_a_fold(staged, contract_turn, beside)
    beside.wait()
    assert _fold_version_files(staged, beside.version), "the fold wrote its partitions"

    # another process folds in line between two of the loop's runs: it must not take the fold's version
    other = staged.refresh(6 * MINUTE_MS + 6000, deltas_max=0)
    assert other["folded_partitions"] and other["version"] > beside.version
    derived = staged.assert_equal_to_live()

    after = staged.refresh(6 * MINUTE_MS + 7000, beside=beside, deltas_max=1)
    assert after["folded_partitions"] == [], "the loop's fold was of partitions rewritten since"
    assert _fold_version_files(staged, beside.version) == []
    assert not beside.marker.exists()
    assert staged.assert_equal_to_live() == derived


def test_a_refresh_counts_its_own_cpu_not_the_folds_beside_it(
    staged: StagedStore, contract_turn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a fold that keeps a core busy until the refresh after it is over: DuckDB work on the fold's own thread
    # (without the GIL), its thread's CPU clock noted at every query
    done = threading.Event()
    samples: list[tuple[float, float]] = []  # (time.monotonic(), the fold thread's CPU seconds)
    fold_files = materialize._fold_files

    def fold_files_after_busy_work(run: Any, manifest: Any) -> list[str]:
        busy = duckdb.connect()
        busy.execute("set threads = 1")
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            busy.execute("select count(*) from range(1000000) where hash(range) % 7 = 0").fetchall()
            samples.append((time.monotonic(), time.thread_time()))
        busy.close()
        return fold_files(run, manifest)

    monkeypatch.setattr(materialize, "_fold_files", fold_files_after_busy_work)
    monkeypatch.setattr(materialize, "FOLD_NICE", 0)  # a fair share of the cores on a busy test host
    beside = _beside(staged)
    late_tools = _two_deltas_then_a_fold(staged, contract_turn, beside)
    staged.send(late_tools, at_ms=6 * MINUTE_MS + 6000)
    began, cpu = time.monotonic(), time.process_time()
    beside_run = staged.refresh(6 * MINUTE_MS + 7000, beside=beside, deltas_max=1)
    ended, process_cpu = time.monotonic(), time.process_time() - cpu
    done.set()
    beside.wait()

    during = [thread_cpu for at, thread_cpu in samples if began <= at <= ended]
    fold_cpu = during[-1] - during[0] if len(during) > 1 else 0.0
    assert beside_run["fold_beside"] is None and beside_run["folded_partitions"] == [], "the fold was running"
    assert fold_cpu > 0.15, "the fold kept a core busy while the refresh ran"
    # the process's CPU over the refresh is the refresh's and the fold's: the run counts its own
    assert beside_run["cpu_seconds"] == pytest.approx(process_cpu - fold_cpu, abs=0.1)
    merged = staged.refresh(6 * MINUTE_MS + 8000, beside=beside, deltas_max=1)
    assert merged["fold_beside_cpu_seconds"] >= fold_cpu, "the fold's CPU is its own figure"
    staged.assert_equal_to_live()


def test_a_loop_does_not_fold_beside_while_another_loops_fold_is_under_way(
    staged: StagedStore, contract_turn: Any
) -> None:
    first = _beside(staged)
    second = _beside(staged)  # another loop on the same store
    late_tools = _two_deltas_then_a_fold(staged, contract_turn, first)
    first.wait()

    # the other loop gets the lock first: a fold is due, but the first loop's would fold the same deltas
    staged.send(late_tools, at_ms=6 * MINUTE_MS + 6000)
    other = staged.refresh(6 * MINUTE_MS + 7000, beside=second, deltas_max=1)
    assert other["deltas"] == 3 and other["fold_beside"] is None and second.base is None
    staged.assert_equal_to_live()

    merged = staged.refresh(6 * MINUTE_MS + 8000, beside=first, deltas_max=1)
    assert merged["folded_partitions"] == first.parts and merged["deltas"] == 1
    staged.assert_equal_to_live()


CHILD = """
import os, signal, sys
from pathlib import Path
from turnlens.queries import materialize
store, glob, now_ns = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
beside = materialize.FoldBeside(store, glob, None, None)
summary = materialize.materialize(store, glob, margin_s=0, now_ns=now_ns, deltas_max=1, beside=beside)
assert summary["fold_beside"] == "started", summary
os.kill(os.getpid(), signal.SIGKILL)  # while the fold runs, or before its merge
"""


def test_a_fold_whose_process_was_killed_leaves_no_file(staged: StagedStore, contract_turn: Any) -> None:
    early = contract_turn(turn="early", key="k-early", trace="te", session="s-early")
    staged.send(early, at_ms=1000)
    staged.refresh(2000)
    staged.send(early, at_ms=3000)  # retried exports: a delta each, the second run's starting a fold
    staged.refresh(3500, deltas_max=1)
    staged.send(early, at_ms=4000)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(staged.dir), staged.glob, str(received_ns(4500))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    [marker] = (staged.dir / "derived").glob(f"{materialize.FOLD_PREFIX}*")  # under way, or not merged
    version = int(json.loads(marker.read_text())["version"])

    after = staged.refresh(5000)
    assert not marker.exists()
    named = derived_manifest.current_snapshot(staged.dir)
    assert named is not None
    leftover = [str(path) for path in _fold_version_files(staged, version) if str(path) not in named.files()]
    assert leftover == []
    assert after["mode"] == "refresh"
    staged.assert_equal_to_live()


def test_a_loop_stopped_while_it_folds_beside_exits_cleanly_and_leaves_nothing(
    staged: StagedStore, contract_turn: Any
) -> None:
    # a turn two minutes ago (a recent minute partition: no roll-up is due), exported four times: 3 deltas
    ago = int(time.time() * 1000) - T0_MS - 2 * MINUTE_MS
    turn = shifted(contract_turn(turn="t", key="k-t", trace="tt", session="s-t"), ago)
    staged.send(turn, at_ms=ago + 1000)
    staged.refresh(ago + 1100, deltas_max=100)
    for n in range(3):
        staged.send(turn, at_ms=ago + 2000 + 100 * n)
        staged.refresh(ago + 2050 + 100 * n, deltas_max=100)

    # the collector's loop, folding past two deltas: its first run finds more and folds beside its refreshes
    loop = subprocess.Popen(
        [sys.executable, "-m", "turnlens.cli", "materialize", "--store", str(staged.dir), "--every", "0.05"]
        + ["--fold-after", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline, markers = time.monotonic() + 60, []
    while not markers and time.monotonic() < deadline and loop.poll() is None:
        markers = sorted((staged.dir / "derived").glob(f"{materialize.FOLD_PREFIX}*"))
        time.sleep(0.005)
    assert markers, "the loop started a fold beside its refreshes"
    version = int(json.loads(markers[0].read_text())["version"])
    loop.send_signal(signal.SIGTERM)  # as the collector stops it: the fold under way, or not merged yet
    _, stderr = loop.communicate(timeout=30)
    assert loop.returncode == 128 + signal.SIGTERM and "Traceback" not in stderr, stderr

    staged.refresh(int(time.time() * 1000) - T0_MS)
    assert list((staged.dir / "derived").glob(f"{materialize.FOLD_PREFIX}*")) == []
    named = derived_manifest.current_snapshot(staged.dir)
    assert named is not None
    left = [str(path) for path in _fold_version_files(staged, version) if str(path) not in named.files()]
    assert left == [], "the stopped fold's files are removed (or were merged)"
    staged.assert_equal_to_live()
