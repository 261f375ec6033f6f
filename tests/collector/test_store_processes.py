"""The store across real processes: kill -9 of writers and compactors, two writers, readers throughout."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import store_procs as procs
from turnlens.collector.store import Store
from turnlens.queries import catalog

GRACE_S = 4.0
SCRIPT = str(Path(__file__).with_name("store_procs.py"))


_started: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test() -> Iterator[None]:
    yield
    while _started:
        process = _started.pop()
        if process.poll() is None:
            process.kill()
            process.communicate()


def start(role: str, store: Path, *args: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, SCRIPT, role, "--store", str(store), "--seconds", "120", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _started.append(process)
    return process


def finish(process: subprocess.Popen[str], timeout: float = 60) -> str:
    """Waits for a process that should succeed; its stdout."""
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return out


def stored_ids(store: Path) -> list[str]:
    with catalog.connect(store) as con:
        return [row[0] for row in con.sql("select span_id from spans").fetchall()]


def segment_files(store: Path) -> list[Path]:
    return [p for p in (store / "segments").glob("*/*.parquet") if p.name != "empty.parquet"]


def new_store(root: Path) -> Path:
    """A store with its catalog, as `turnlens collect` creates it."""
    with Store(root) as store:
        catalog.write_catalog(root, store.segments_glob)
    return root


class Readers:
    """Reader processes querying the store's catalog in a loop until stopped."""

    def __init__(self, store: Path, count: int = 2) -> None:
        self.stop_file = store.parent / "stop-readers"
        self.processes = [start("reader", store, "--stop-file", str(self.stop_file)) for _ in range(count)]
        for process in self.processes:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "ready"

    def stop(self) -> list[list[int]]:
        """Stops them; the span counts each one saw, in order. Any error in a reader fails the test, and so
        do many retries (they are owed only to the moment a sweep deletes files)."""
        self.stop_file.touch()
        outputs = []
        for process in self.processes:
            out, err = process.communicate(timeout=60)
            print(out[-500:])  # shown when the test fails: the last counts and query durations
            assert process.returncode == 0, err
            assert out.count("retried") <= 4
            outputs.append(out)
        return [reader_counts(out) for out in outputs]


def reader_counts(out: str) -> list[int]:
    counts = [int(line.split()[1]) for line in out.splitlines() if line.startswith("count ")]
    assert counts, "the reader never completed a query"
    return counts


@pytest.mark.slow
def test_kill_9_loses_nothing_that_was_acknowledged(tmp_path: Path) -> None:
    store = new_store(tmp_path / "store")
    acked: set[str] = set()
    rng = random.Random(7)
    for round_ in range(3):
        writer = start("writer", store, "--writer", str(round_ + 1), "--threads", "4", "--batch", "150")
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
        lines = [writer.stdout.readline() for _ in range(10)]  # it is acknowledging steadily
        time.sleep(rng.uniform(0.05, 0.6))  # then die at an arbitrary moment, mid-write most likely
        os.kill(writer.pid, signal.SIGKILL)
        rest, _ = writer.communicate(timeout=30)
        assert writer.returncode == -signal.SIGKILL
        round_acks = procs.parse_acks("".join(lines) + rest)
        assert len(round_acks) >= 10 * 150
        acked |= round_acks

    # A compactor killed mid-pass loses nothing either, and the next pass finishes its work.
    compactor = start("compactor", store, "--grace", "0")
    time.sleep(rng.uniform(0.8, 1.6))
    compactor.kill()
    compactor.communicate(timeout=30)

    ids = stored_ids(store)  # every segment file that a reader's glob matches is whole
    assert acked <= set(ids), f"{len(acked - set(ids))} acknowledged spans lost"
    finish(start("compactor", store, "--grace", "0"))
    after = stored_ids(store)
    assert sorted(after) == sorted(set(ids)), "compaction changed what the views show"
    assert not list((store / "segments").glob("*/.*.tmp")), "temporary files of dead processes remain"


def test_two_writer_processes_and_readers_share_one_store(tmp_path: Path) -> None:
    store = new_store(tmp_path / "store")
    watching = Readers(store)
    writers = [start("writer", store, "--writer", str(w), "--batches", "6", "--threads", "3") for w in (1, 2)]
    acked = set().union(*(procs.parse_acks(finish(w)) for w in writers))
    for counts in watching.stop():
        assert counts == sorted(counts), "a reader saw spans disappear"
    assert len(acked) == 2 * 3 * 6 * 200
    ids = stored_ids(store)
    assert len(ids) == len(set(ids)) == len(acked)
    assert set(ids) == acked
    writer_ids = {p.name.rsplit("-", 1)[0] for p in segment_files(store)}
    assert len(writer_ids) == 2


@pytest.mark.slow
def test_compaction_in_two_processes_while_readers_query(tmp_path: Path) -> None:
    store = new_store(tmp_path / "store")
    with Store(store, flush_interval_s=0.0) as writer:
        for k in range(40):
            writer.append(procs.spans([procs.span_id(1, k * 25 + i) for i in range(25)]))
    before = len(segment_files(store))
    assert before == 40

    watching = Readers(store)
    # The grace period must outlast the slowest query; on a loaded 2-core machine one took 1.6 s.
    compactors = [start("compactor", store, "--grace", str(GRACE_S)) for _ in range(2)]
    merged = [finish(c).split() for c in compactors]
    assert sum(int(m[3]) for m in merged) == 40, "each segment is merged by exactly one compactor"
    time.sleep(GRACE_S)
    finish(start("compactor", store, "--grace", str(GRACE_S)))  # grace passed: the originals go

    for counts in watching.stop():
        assert set(counts) == {1000}, "readers saw a count other than the stored spans"
    assert len(segment_files(store)) == 1
    assert len(stored_ids(store)) == 1000
