"""No reader fails because a file moved: readers of every kind read in loops, in their own processes, while
a writer adds segments and compaction and materialisation replace files with a grace period of zero."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import lease_procs
import pyarrow as pa
import pytest
import store_procs
from turnlens.collector import compaction, leases, maintenance
from turnlens.collector.store import Store
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog, materialize
from turnlens.queries import manifest as derived_manifest

from turnlens.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "sample.jsonl.gz"
PROCS = str(Path(__file__).with_name("lease_procs.py"))
STORE_PROCS = str(Path(__file__).with_name("store_procs.py"))
KINDS = ("live", "turn", "divergences", "export", "dashboard")
SNAPSHOTS = 1  # the readers read until the maintainer replaced the snapshot this often, deleting files
DEADLINE_S = 900.0  # a snapshot of the sample takes 10 s on two quiet cores, minutes on two very busy ones

_started: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test() -> Iterator[None]:
    yield
    while _started:
        process = _started.pop()
        if process.poll() is None:
            process.kill()
            process.communicate()


def start(*command: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _started.append(process)
    return process


def wait_ready(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip() == "ready", process.stderr.read() if process.stderr else line


def segment_files(store: Path) -> set[Path]:
    return {p for p in (store / "segments").glob("*/*.parquet") if p.name != "empty.parquet"}


def progressed(progress: list[str], what: str) -> int:
    """Files deleted or snapshots written so far, by the maintainer's latest `deleted N snapshots M` line."""
    lines = [line.split() for line in progress if line.startswith("deleted")]
    return int(lines[-1][lines[-1].index(what) + 1]) if lines else 0


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_readers_never_fail_while_compaction_and_snapshots_delete_at_zero_grace(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert main(["ingest", "--store", str(store), "--quiet", str(SAMPLE)]) == 0
    ingested = segment_files(store)
    with Store(store, flush_interval_s=0.0) as writer:  # small segments for the first compaction to merge
        for k in range(8):
            writer.append(store_procs.spans([store_procs.span_id(9, k * 10 + n) for n in range(10)]))
    materialize.materialize(store, segments_glob(store), margin_s=0, grace_s=0)
    first_generation = derived_manifest.current_snapshot(store)
    small_segments = segment_files(store) - ingested
    assert first_generation is not None and len(small_segments) == 8

    stop = tmp_path / "stop"
    readers = {
        kind: start(PROCS, "reader", kind, "--store", str(store), "--stop-file", str(stop)) for kind in KINDS
    }
    for process in readers.values():
        wait_ready(process)
    writer = start(  # a segment every second or so: work for compaction, not a flood of files
        STORE_PROCS, "writer", "--store", str(store), "--threads", "1", "--batch", "40", "--batches", "30",
        "--flush-interval", "1.0", "--seconds", str(DEADLINE_S),
    )
    maintainer = start(PROCS, "maintainer", "--store", str(store), "--stop-file", str(stop))
    assert maintainer.stdout is not None
    deadline = time.monotonic() + DEADLINE_S
    progress = [maintainer.stdout.readline()]
    while progressed(progress, "snapshots") < SNAPSHOTS or progressed(progress, "deleted") == 0:
        assert time.monotonic() < deadline and progress[-1], progress
        progress.append(maintainer.stdout.readline())
    stop.touch()
    writer.kill()

    outputs = {kind: process.communicate(timeout=120)[0] for kind, process in readers.items()}
    maintained, errors = maintainer.communicate(timeout=300)
    assert maintainer.returncode == 0, errors
    writer.communicate(timeout=60)
    maintained = "".join(progress) + maintained

    for kind, out in outputs.items():
        ok, failures = lease_procs.reads_of(out)
        assert failures == [], f"{kind} reader: {failures[:3]}"
        assert ok >= 2, f"the {kind} reader read too little to tell: {out[-500:]}"

    # files really moved under the readers: the first snapshot and the first segments are gone from the disk
    first_files = [Path(f) for table in derived_manifest.TABLES for f in first_generation.table_files(table)]
    assert any(not f.exists() for f in first_files), "a partition of the first snapshot was deleted"
    assert not small_segments & segment_files(store), "the small segments were merged and deleted"


def test_a_deletion_waits_while_a_reader_holds_a_lease(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Store(store) as writer:
        writer.append(_spans())
    doomed = store / "derived" / "gen-1"
    doomed.mkdir(parents=True)
    (doomed / "turns.parquet").write_bytes(b"rows")

    with leases.reading(store) as held:
        assert held
        compaction.retire(store, [doomed], grace_s=0)  # due at once, but a reader is reading
        assert doomed.exists()
        assert compaction.sweep(store) == 0
        assert doomed.exists()
    assert compaction.sweep(store) == 1
    assert not doomed.exists()


def test_a_long_reader_postpones_deletions_without_closing_the_turnstile(tmp_path: Path) -> None:
    store = tmp_path / "store"
    Store(store).close()
    doomed = store / "derived" / "gen-1"
    doomed.mkdir(parents=True)
    compaction.retire(store, [doomed], grace_s=60)
    with leases.reading(store, long=True):  # a materialise run
        started = time.monotonic()
        assert compaction.sweep(store, clock=lambda: time.time() + 61) == 0
        assert time.monotonic() - started < leases.DELETER_WAIT_S, "it held the turnstile for a long reader"
    assert doomed.exists()
    assert compaction.sweep(store, clock=lambda: time.time() + 61) == 1


def test_a_read_that_met_a_moved_file_runs_again(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Store(store) as writer:
        writer.append(_spans())
        catalog.write_catalog(store, writer.segments_glob)
    attempts = []

    def read() -> int:
        attempts.append(1)
        if len(attempts) == 1:
            with catalog.reading(store) as con:  # what a reader without a lease meets: the file went
                con.execute(f"select * from read_parquet('{store / 'segments' / 'gone.parquet'}')")
        with catalog.reading(store) as con:
            return int(con.execute("select count(*) from spans").fetchall()[0][0])

    assert catalog.retrying(read) == 8
    assert len(attempts) == 2


def _spans() -> pa.Table:
    return store_procs.spans([store_procs.span_id(1, n) for n in range(8)])


def test_the_collector_deletes_replaced_files_in_the_first_pause_of_a_long_reader(tmp_path: Path) -> None:
    """A materialise run reads under a long lease, back to back with the next; a replaced segment whose
    grace period is over goes in the pause after the run, not when a compaction pass falls in it."""
    store = tmp_path / "store"
    replaced = store / "segments" / "date=2026-01-01" / "replaced.parquet"
    replaced.parent.mkdir(parents=True)
    replaced.write_bytes(b"a segment compaction merged into another")
    leases.ensure_lock_file(store)
    reader = subprocess.Popen(  # a long reader in a process of its own, as the collector's materialiser is
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from turnlens.collector import leases\n"
            f"with leases.reading(Path({str(store)!r}), long=True):\n"
            "    print('reading', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    stop = threading.Event()
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "reading"
        compaction.retire(store, [replaced], grace_s=0.2)
        sweeper = threading.Thread(target=maintenance.sweep_replaced, args=(store, stop, 0.1), daemon=True)
        sweeper.start()
        time.sleep(1.0)
        assert replaced.exists(), "deleted under a reader's lease"
        assert reader.stdin is not None
        reader.stdin.close()  # the run ends
        reader.wait(timeout=30)
        deadline = time.monotonic() + 10
        while replaced.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not replaced.exists(), "not deleted in the pause after the long reader"
    finally:
        stop.set()
        if reader.poll() is None:
            reader.kill()
