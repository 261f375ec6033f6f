"""The store in one process: group commit, backpressure, visibility, duplicates, compaction, retention."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import store_procs as procs
from turnlens.collector import quarantine, segments
from turnlens.collector.segments import host_tag
from turnlens.collector.store import Store, StoreClosed, StoreOverloaded
from turnlens.kernel.durations import parse_seconds
from turnlens.queries import catalog

NS_PER_DAY = 86_400 * 1_000_000_000


class Clock:
    """A wall clock the test moves by hand, so a grace period passes exactly when the test says."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def open_store(root: Path, **options: Any) -> Store:
    return Store(root, **options)


def with_catalog(root: Path, **options: Any) -> Store:
    """A store and its real catalog file, as `turnlens collect` leaves them."""
    store = Store(root, **options)
    catalog.write_catalog(root, store.segments_glob)
    return store


def base_views(root: Path) -> duckdb.DuckDBPyConnection:
    """The catalog's base views over the store in an in-memory DuckDB: what a reader sees, built in
    milliseconds (the full catalog takes seconds to write; the process tests use that one)."""
    con = duckdb.connect()
    quarantine.ensure_log(root.resolve() / "segments")  # as write_catalog does: one base view reads it
    glob = str(root.resolve() / "segments" / "*" / "*.parquet")
    catalog.apply_views(con, glob, [view for view in catalog.load_views() if view.path.parent.name == "base"])
    return con


def one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    """The single row a query answers."""
    (row,) = con.sql(sql).fetchall()
    return row


def span_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [row[0] for row in con.sql("select span_id from spans").fetchall()]


def segment_files(root: Path) -> list[Path]:
    return [p for p in (root / "segments").glob("*/*.parquet") if p.name != "empty.parquet"]


def ids(writer: int, first: int, count: int) -> list[str]:
    return [procs.span_id(writer, n) for n in range(first, first + count)]


def test_a_fresh_store_has_the_placeholder_and_views_that_bind(tmp_path: Path) -> None:
    store = with_catalog(tmp_path)
    store.close()
    placeholder = tmp_path / "segments" / "date=1970-01-01" / "empty.parquet"
    assert pq.read_table(placeholder).schema.names == procs.SEGMENT_SCHEMA.names
    assert store.segments_glob == str(tmp_path.resolve() / "segments" / "*" / "*.parquet")
    with catalog.connect(tmp_path) as con:
        assert one(con, "select count(*) from spans") == (0,)
        assert one(con, "select count(*) from span_events") == (0,)


def test_appended_rows_are_visible_to_a_new_reader_as_soon_as_append_returns(tmp_path: Path) -> None:
    store = with_catalog(tmp_path, flush_interval_s=0.2)
    try:
        for round_ in range(3):
            store.append(procs.spans(ids(1, round_ * 10, 10)))
            with catalog.connect(tmp_path) as con:
                assert len(span_ids(con)) == (round_ + 1) * 10
    finally:
        store.close()
    names = [p.name for p in segment_files(tmp_path)]
    assert all(name.startswith(store.writer_id + "-") for name in names)
    assert not list((tmp_path / "segments").glob("*/.*.tmp"))


def test_concurrent_appends_share_segments_and_each_returns_only_once_its_rows_are_on_disk(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path, flush_interval_s=0.05)
    not_on_disk: list[str] = []

    def appender(thread: int) -> None:
        for k in range(15):
            batch = ids(thread, k * 50, 50)
            store.append(procs.spans(batch))
            if k % 5 == 0:  # what a reader could see right now, straight from the files
                visible = pq.ParquetDataset(segment_files(tmp_path)).read(columns=["span_id"])
                on_disk = set(visible["span_id"].to_pylist())
                not_on_disk.extend(set(batch) - on_disk)

    threads = [threading.Thread(target=appender, args=(t,)) for t in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()

    assert not_on_disk == []
    with base_views(tmp_path) as con:
        assert one(con, "select count(*), count(distinct span_id) from spans") == (12_000, 12_000)
    assert store.stats.appends == 16 * 15
    assert store.stats.segments_written == len(segment_files(tmp_path))
    assert store.stats.segments_written <= store.stats.appends / 3, "appends were not grouped into segments"


def test_a_lone_appender_of_full_batches_is_not_held_for_the_flush_interval(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_interval_s=3.0)
    try:
        store.append(procs.spans(ids(1, 0, 600)))
        started = time.monotonic()
        store.append(procs.spans(ids(1, 600, 600)))  # nobody else is appending: written now
        assert time.monotonic() - started < 1.5
        started = time.monotonic()
        store.append(procs.spans(ids(1, 1200, 10)))  # a tiny one waits for the interval, to batch
        assert time.monotonic() - started > 1.0
    finally:
        store.close()
    assert store.stats.segments_written == 3


def test_a_batch_received_across_midnight_lands_in_both_date_partitions(tmp_path: Path) -> None:
    today = time.time_ns()
    store = open_store(tmp_path)
    today_rows = procs.spans(ids(1, 0, 3), received_ns=today)
    store.append(pa.concat_tables([today_rows, procs.spans(ids(1, 3, 4), received_ns=today - NS_PER_DAY)]))
    store.close()
    by_day = {p.parent.name: pq.read_table(p).num_rows for p in segment_files(tmp_path)}
    today_utc = time.strftime("%Y-%m-%d", time.gmtime(today / 1e9))
    yesterday_utc = time.strftime("%Y-%m-%d", time.gmtime(today / 1e9 - 86_400))
    assert by_day == {f"date={today_utc}": 3, f"date={yesterday_utc}": 4}


def test_a_full_backlog_rejects_the_whole_append_at_once_and_stores_none_of_it(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_interval_s=1.5, max_backlog_rows=1000)
    store.append(procs.spans(ids(1, 0, 10)))  # written at once; the next write may start 1.5 s later
    waiting = threading.Thread(target=store.append, args=(procs.spans(ids(2, 0, 800)),))
    waiting.start()
    time.sleep(0.2)

    started = time.monotonic()
    with pytest.raises(StoreOverloaded) as overloaded:
        store.append(procs.spans(ids(3, 0, 500)))
    assert time.monotonic() - started < 0.5, "an overloaded store must answer at once"
    assert 0 < overloaded.value.retry_after_s <= 30

    waiting.join()
    with base_views(tmp_path) as con:
        stored = set(span_ids(con))
    assert stored == set(ids(1, 0, 10)) | set(ids(2, 0, 800))

    store.append(procs.spans(ids(3, 0, 500)))  # the backlog drained: the retry is accepted
    store.close()
    with base_views(tmp_path) as con:
        assert one(con, "select count(*) from spans") == (1310,)


def test_close_writes_what_was_appended_and_then_refuses_appends(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_interval_s=5.0)
    store.append(procs.spans(ids(1, 0, 5)))
    waiting = threading.Thread(target=store.append, args=(procs.spans(ids(1, 5, 5)),))
    waiting.start()
    time.sleep(0.1)
    started = time.monotonic()
    store.close()
    waiting.join()
    assert time.monotonic() - started < 2.0, "close must not wait for the flush interval"
    with pytest.raises(StoreClosed):
        store.append(procs.spans(ids(1, 10, 5)))
    with base_views(tmp_path) as con:
        assert sorted(span_ids(con)) == ids(1, 0, 10)


def test_a_retried_export_is_counted_once_and_its_newest_copy_wins(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_interval_s=0.0)
    batch = ids(1, 0, 20)
    store.append(procs.spans(batch, received_ns=1_000, name="first try"))
    store.append(procs.spans(batch[:10], received_ns=2_000, name="retry"))
    store.append(procs.spans(batch[10:], received_ns=500, name="late duplicate"))
    store.close()
    assert len(segment_files(tmp_path)) == 3
    with base_views(tmp_path) as con:
        names = dict(con.sql("select span_id, name from spans").fetchall())
    assert len(names) == 20
    assert {names[i] for i in batch[:10]} == {"retry"}
    assert {names[i] for i in batch[10:]} == {"first try"}


def test_compaction_merges_small_segments_and_keeps_every_span(tmp_path: Path) -> None:
    clock = Clock()
    store = open_store(tmp_path, flush_interval_s=0.0, clock=clock)
    for k in range(12):
        store.append(procs.spans(ids(1, k * 30, 30)))
    store.append(procs.spans(ids(1, 0, 30)))  # a duplicate, so the merge also holds a retried export
    before = segment_files(tmp_path)
    assert len(before) == 13

    result = store.compact(min_segments=4, grace_s=300)
    assert (result.merged_segments, result.replaced_segments, result.rows) == (1, 13, 390)
    after = segment_files(tmp_path)
    assert set(before) <= set(after), "originals must stay for the grace period"
    with base_views(tmp_path) as con:
        assert one(con, "select count(*) from spans") == (360,)

    clock.advance(299)
    assert store.compact(min_segments=2).merged_segments == 0, "scheduled files are not merged again"
    assert len(segment_files(tmp_path)) == 14
    clock.advance(2)
    result = store.compact(min_segments=2)  # the grace period passed: this pass deletes the originals
    store.close()
    assert result.merged_segments == 0
    assert result.deleted_files == 13
    remaining = segment_files(tmp_path)
    assert len(remaining) == 1
    assert pq.ParquetFile(remaining[0]).metadata.row_group(0).column(0).compression == "ZSTD"
    with base_views(tmp_path) as con:
        assert one(con, "select count(*), count(distinct span_id) from spans") == (360, 360)


def test_a_merged_segment_sorts_after_every_segment_it_holds(tmp_path: Path) -> None:
    """Of two equal copies the views keep the one in the last-sorting file, and a query's later scans of the
    store can miss sources a sweep deleted after its first scan: were a source to win, a query running as they
    are deleted would find none of their spans."""
    for writer_id in ("aaa", "zzz"):  # the writers' names sort before and after the compactor's
        with Store(tmp_path / writer_id, writer_id=writer_id, flush_interval_s=0.0) as writer:
            for k in range(6):
                writer.append(procs.spans(ids(1, k * 10, 10)))
        sources = segment_files(tmp_path / writer_id)
        with Store(tmp_path / writer_id, writer_id="mmm") as compactor:
            compactor.compact(min_segments=2, grace_s=0)  # the sources go: the merged segment may merge again
        (merged,) = segment_files(tmp_path / writer_id)
        assert all(merged.name > source.name for source in sources), (merged.name, writer_id)

        # merged again with newer small segments: the second merge sorts after the first one too
        with Store(tmp_path / writer_id, writer_id=f"{writer_id}2", flush_interval_s=0.0) as writer:
            for k in range(6, 9):
                writer.append(procs.spans(ids(1, k * 10, 10)))
        newer = set(segment_files(tmp_path / writer_id)) - {merged}
        with Store(tmp_path / writer_id, writer_id="mmm") as compactor:
            assert compactor.compact(min_segments=2, grace_s=300).replaced_segments == 4
        (remerged,) = set(segment_files(tmp_path / writer_id)) - newer - {merged}
        assert all(remerged.name > source.name for source in (merged, *newer)), (remerged.name, writer_id)
        with base_views(tmp_path / writer_id) as con:
            assert one(con, "select count(*) from spans") == (90,)


@pytest.mark.slow
def test_a_query_counts_every_span_while_retried_exports_and_merges_land(tmp_path: Path) -> None:
    """Each scan of a query lists the segments when it is bound; a retried export or a merged segment that
    lands between two scans must not make the query lose the spans it holds copies of (before the newest-copy
    scan was bound first, 2 to 5 of 84-92 such queries lost spans in each of four runs)."""
    store = open_store(tmp_path, flush_interval_s=0.0, grace_s=3600)
    every = ids(1, 0, 1000)
    for k in range(40):
        store.append(procs.spans(every[k * 25 : (k + 1) * 25]))
    (partition,) = {path.parent for path in segment_files(tmp_path)}
    con = base_views(tmp_path)
    counts: list[int] = []
    landed = threading.Event()

    def land() -> None:
        rng = random.Random(3)
        for n in range(80):
            if n % 8 == 7:
                store.compact(min_segments=2)  # a merge of every segment so far, published mid-query
            else:  # a retried export of every span: newer copies in one segment, landing at a random moment
                retry = procs.spans(every, received_ns=time.time_ns())
                time.sleep(rng.uniform(0.0, 0.3))
                segments.write_segment(retry, partition / f"retry-{n:08d}.parquet")
        landed.set()

    lander = threading.Thread(target=land)
    lander.start()
    while not landed.is_set():
        counts.append(one(con, "select count(*) from spans")[0])
    lander.join()
    store.close()
    assert len(counts) >= 20
    assert set(counts) == {1000}, f"{sum(c != 1000 for c in counts)} of {len(counts)} queries lost spans"


def test_compaction_leaves_partitions_with_few_segments_alone(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_interval_s=0.0)
    for k in range(3):
        store.append(procs.spans(ids(1, k * 10, 10)))
    result = store.compact(min_segments=4, grace_s=0)
    store.close()
    assert result.merged_segments == 0
    assert len(segment_files(tmp_path)) == 3


def test_two_compactors_at_once_never_merge_the_same_segment(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush_interval_s=0.0)
    for k in range(20):
        store.append(procs.spans(ids(1, k * 10, 10)))
    other = Store(tmp_path)
    results = []
    threads = [
        threading.Thread(target=lambda s=s: results.append(s.compact(min_segments=2, grace_s=60)))
        for s in (store, other)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    other.close()
    assert sum(r.replaced_segments for r in results) == 20
    assert sum(r.merged_segments for r in results) == 1
    with base_views(tmp_path) as con:
        assert one(con, "select count(*) from spans") == (200,)


def test_retention_drops_old_partitions_after_the_grace_period(tmp_path: Path) -> None:
    now = time.time_ns()
    clock = Clock()
    store = open_store(tmp_path, flush_interval_s=0.0, clock=clock)
    store.append(procs.spans(ids(1, 0, 5), received_ns=now - 40 * NS_PER_DAY))
    store.append(procs.spans(ids(1, 5, 6), received_ns=now - 10 * NS_PER_DAY))
    store.append(procs.spans(ids(1, 11, 7), start_ns=now))
    partitions = sorted(p.name for p in (tmp_path / "segments").iterdir() if p.is_dir())
    assert len(partitions) == 4  # three days and the placeholder's

    assert store.apply_retention(parse_seconds("30d"), grace_s=60) == 1
    clock.advance(59)
    assert store.apply_retention(parse_seconds("30d"), grace_s=60) == 0
    with base_views(tmp_path) as con:
        assert one(con, "select count(*) from spans") == (18,), "kept during the grace period"
    clock.advance(2)
    assert store.apply_retention(parse_seconds("30d"), grace_s=60) == 0
    store.close()

    with base_views(tmp_path) as con:
        assert sorted(span_ids(con)) == ids(1, 5, 13)
    assert sorted(p.name for p in (tmp_path / "segments").iterdir() if p.is_dir()) == [
        name for name in partitions if name != partitions[1]
    ]
    assert (tmp_path / "segments" / "date=1970-01-01" / "empty.parquet").exists()


def test_one_maintenance_pass_applies_retention_then_compacts(tmp_path: Path) -> None:
    now = time.time_ns()
    store = open_store(tmp_path, flush_interval_s=0.0, grace_s=0)
    store.append(procs.spans(ids(1, 0, 5), received_ns=now - 3 * NS_PER_DAY))
    for k in range(10):
        store.append(procs.spans(ids(2, k * 10, 10)))
    assert store.stats.segments_written == 11  # the old day's segment too, before retention drops it
    old = tmp_path / "segments" / time.strftime("date=%Y-%m-%d", time.gmtime(now / 1e9 - 3 * 86_400))
    assert store.apply_retention(86_400) == 1
    assert store.compact().merged_segments == 1
    store.close()
    assert not old.exists()
    assert len(segment_files(tmp_path)) == 1
    with base_views(tmp_path) as con:
        assert sorted(span_ids(con)) == ids(2, 0, 100)


def test_stale_temporary_files_of_dead_writers_are_removed_at_start(tmp_path: Path) -> None:
    Store(tmp_path).close()
    partition = tmp_path / "segments" / "date=2026-01-01"
    partition.mkdir()
    dead = partition / ".w-00000001.parquet.otherhost.999999.tmp"
    dead.write_bytes(b"half a segment")
    code = "import os; print(os.getpid())"
    exited = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    ours_dead = partition / f".w-00000002.parquet.{host_tag()}.{int(exited.stdout)}.tmp"
    ours_dead.write_bytes(b"half a segment")
    Store(tmp_path).close()
    assert not ours_dead.exists(), "a dead process of this host left it"
    assert dead.exists(), "another host's writer may still be writing it"


def test_writer_ids_are_unique_and_validated(tmp_path: Path) -> None:
    first, second = Store(tmp_path), Store(tmp_path)
    first.close()
    second.close()
    assert first.writer_id != second.writer_id
    with pytest.raises(ValueError):
        Store(tmp_path, writer_id="../escape")


def test_append_refuses_a_table_of_another_shape(tmp_path: Path) -> None:
    store = Store(tmp_path)
    try:
        with pytest.raises(ValueError):
            store.append(pa.table({"span_id": ["a"]}))
    finally:
        store.close()
