"""Compaction and retention of the segment store, safe beside writers and readers.

Segments are immutable once renamed into place, so every visible file is sealed. A compactor merges
small segments of a date partition into one (durable before anything else happens) and only schedules
the originals for deletion: they stay for a grace period because a reader may already have listed
them, and the views de-duplicate the rows meanwhile. Retention schedules whole old partitions the same
way. Schedules live in a small manifest, so a pass that dies half-way is finished by the next one. One
maintenance pass at a time per store, by an fcntl lock file.

Deleting is the reader-safe part (leases.py): a due file is removed only at a moment no registered reader
(dashboard, alerts, export, a materialise run) is reading, otherwise it waits for a later pass. The grace
period is for readers that do not register, such as an analyst's own DuckDB session over the catalogue.
`retire` schedules any file or folder of the store the same way (a replaced snapshot generation, say).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from turnlens.collector import leases, segments
from turnlens.kernel.schema import SEGMENT_SCHEMA

DEFAULT_GRACE_S = 300.0  # for unregistered readers: far longer than an analyst's query over the catalogue
Clock = Callable[[], float]  # what grace periods are measured on: time.time, or a test's own
MANIFEST = "_maintenance.json"
LOCK = "_maintenance.lock"
SMALL_BYTES = 32 * 1024 * 1024  # a segment at least this large is left alone
TARGET_BYTES = 128 * 1024 * 1024  # inputs of one merge add up to at most about this (held in memory to sort)
ROW_GROUP_ROWS = segments.LOOKUP_ROW_GROUP_ROWS  # the merged segment's row groups, sorted by trace_id
MERGE_MARK = "~"  # before a merged segment's count: sorts after any character of a writer id or ".parquet"
_MERGE_COUNT = re.compile(rf"^(?P<base>.+){MERGE_MARK}(?P<count>[0-9]{{6}})$")


class CompactionBusy(Exception):
    """Another process holds the store's maintenance lock."""


@dataclass
class CompactionResult:
    """What one compaction pass did."""

    merged_segments: int = 0  # new segments written
    replaced_segments: int = 0  # small segments they replace (scheduled for deletion after the grace period)
    rows: int = 0  # rows copied into new segments
    deleted_files: int = 0  # files removed this pass because their grace period had passed
    pending_files: int = 0  # files still waiting for their grace period
    partitions: list[str] = field(default_factory=list)  # partitions that received a merged segment


@dataclass
class _Entry:
    """Files to delete once `delete_after_unix` passed: the sources of a merge, or an expired partition."""

    sources: list[str]  # relative to the segments root
    delete_after_unix: float
    output: str | None = None  # the merged segment replacing the sources; None for retention
    published: bool = True  # False while the merged segment is not yet renamed into place

    def files(self) -> set[str]:
        return set(self.sources) | ({self.output} if self.output else set())


class _Manifest:
    """The pending deletions of a store, rewritten atomically; read and written only under the lock."""

    def __init__(self, segments_root: Path) -> None:
        self.path = segments_root / MANIFEST
        self.entries: list[_Entry] = []
        if self.path.exists():
            data = json.loads(self.path.read_text())
            self.entries = [_Entry(**entry) for entry in data.get("entries", [])]

    def save(self) -> None:
        tmp = segments.tmp_path(self.path)
        body = {"entries": [entry.__dict__ for entry in self.entries]}
        tmp.write_text(json.dumps(body, indent=1))
        segments.publish(tmp, self.path)

    def scheduled(self) -> set[str]:
        """Files that some entry will delete or has just produced: compaction leaves them alone."""
        return set().union(*(entry.files() for entry in self.entries))

    def pending_files(self) -> int:
        return sum(len(entry.sources) for entry in self.entries)


@contextmanager
def exclusive_lock(path: Path, timeout_s: float, busy: Exception) -> Iterator[None]:
    """Holds an flock on `path` (per open file, released if the holder dies), waiting up to `timeout_s`;
    raises `busy` when another process holds it longer."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise busy from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def maintenance_lock(segments_root: Path, timeout_s: float) -> contextlib.AbstractContextManager[None]:
    """Holds the store's maintenance lock: one compaction or retention pass at a time."""
    busy = CompactionBusy(f"another process is maintaining {segments_root}")
    return exclusive_lock(segments_root / LOCK, timeout_s, busy)


def _sweep(segments_root: Path, manifest: _Manifest, now: float) -> int:
    """Deletes the files whose grace period passed, when no registered reader is reading; forgets merges that
    never got published."""
    keep: list[_Entry] = []
    due: list[_Entry] = []
    for entry in manifest.entries:
        if not entry.published:
            if not (segments_root / str(entry.output)).exists():
                # The compactor died before renaming the merged segment into place: the sources stay
                # (the temporary file was a dead process's and goes with the stale ones).
                continue
            entry.published = True  # it died after the rename: the merge is complete
        (keep if now < entry.delete_after_unix else due).append(entry)
    deleted = 0
    if due:
        paths = [segments_root / name for entry in due for name in entry.sources]
        with leases.no_readers(segments_root.parent) as alone:
            if alone:
                deleted = leases.remove(paths)
            else:
                keep.extend(due)  # someone is reading: a later pass deletes them
        if alone:
            _tidy(segments_root, {path.parent for path in paths})
    if keep != manifest.entries:
        manifest.entries = keep
        manifest.save()
    return deleted


def _tidy(segments_root: Path, emptied: set[Path]) -> None:
    """Makes the deletions durable and drops the partitions they emptied."""
    for directory in emptied:
        if not directory.is_dir():
            continue
        segments.fsync_dir(directory)
        if directory != (segments_root / segments.PLACEHOLDER).parent and directory.parent == segments_root:
            try:
                directory.rmdir()  # only succeeds when empty; a writer recreates it when needed
            except OSError:
                pass


def retire(
    store_dir: Path,
    paths: list[Path],
    *,
    grace_s: float = DEFAULT_GRACE_S,
    clock: Clock = time.time,
    lock_timeout_s: float = 30.0,
) -> None:
    """Schedules files or folders of the store for deletion once `grace_s` passed and no registered reader is
    reading (compaction's next pass, or a `sweep`): how anything a reader may still hold leaves the disk.

    Raises CompactionBusy when another process holds the maintenance lock longer than `lock_timeout_s`.
    """
    segments_root = Path(store_dir) / segments.SEGMENTS_DIR
    # only this store's files: a store copied or moved may still name its original's in what it had retiring
    store = os.path.abspath(store_dir)
    paths = [path for path in paths if Path(os.path.abspath(path)).is_relative_to(store)]
    if not paths:
        return
    with maintenance_lock(segments_root, lock_timeout_s):
        manifest = _Manifest(segments_root)
        scheduled = manifest.scheduled()
        names = [os.path.relpath(Path(path).resolve(), segments_root.resolve()) for path in paths]
        names = [name for name in names if name not in scheduled]
        if names:
            manifest.entries.append(_Entry(sources=names, delete_after_unix=clock() + grace_s))
            manifest.save()
        if grace_s <= 0:
            _sweep(segments_root, manifest, clock())


def sweep(store_dir: Path, *, clock: Clock = time.time, lock_timeout_s: float = 30.0) -> int:
    """Deletes what is due now (see retire); returns how many files or folders went."""
    segments_root = Path(store_dir) / segments.SEGMENTS_DIR
    with maintenance_lock(segments_root, lock_timeout_s):
        return _sweep(segments_root, _Manifest(segments_root), clock())


def _merge(sources: list[Path], tmp: Path, row_group_rows: int) -> tuple[list[Path], int]:
    """Copies the readable sources with the current schema into `tmp`, sorted by trace_id in row groups of
    `row_group_rows` (a reader looking for a few traces skips most of it); returns those merged and the rows.

    The batch is held in memory to be sorted: about target_bytes of Parquet, a few times that in Arrow, which
    is why the collector compacts in a child process (collector/materializing.py).
    """
    merged: list[Path] = []
    tables: list[pa.Table] = []
    for path in sources:
        try:
            parquet = pq.ParquetFile(str(path))
            if not parquet.schema_arrow.equals(SEGMENT_SCHEMA, check_metadata=False):
                continue  # other types: left as it is (the sweep before a pass quarantines other columns)
            table = parquet.read()
        except (OSError, pa.ArrowException):
            continue  # unreadable or gone: never delete what was not copied
        merged.append(path)
        tables.append(table)
    if not tables:
        return merged, 0
    table = pa.concat_tables(tables).sort_by("trace_id")
    del tables
    options = segments.parquet_options(segments.COLD_COMPRESSION)
    with pq.ParquetWriter(str(tmp), SEGMENT_SCHEMA, **options) as writer:
        writer.write_table(table, row_group_size=row_group_rows)
    return merged, table.num_rows


def merged_name(sources: list[Path]) -> str:
    """The name of the segment merging `sources`: named after the last-sorting source, it sorts after
    every one of them (`<writer>-<seq>~000001.parquet`, then `~000002` when that is merged again), and no
    other merge takes it (that source is consumed by this one).

    Why after: a merged segment holds copies of its sources' spans with the same received time, and the views
    keep, of equal copies, the one whose file sorts last. A query lists the store once per scan, the newest
    copy of each span first (queries/base/spans.sql), so a later scan sees every file the first one saw, and
    more, unless a sweep deleted sources in between: then the later scan holds the merged copy only, which
    the first scan must have chosen.
    """
    last = max(path.name for path in sources).removesuffix(segments.SEGMENT_SUFFIX)
    merge = _MERGE_COUNT.match(last)
    if merge:
        return f"{merge['base']}{MERGE_MARK}{int(merge['count']) + 1:06d}{segments.SEGMENT_SUFFIX}"
    return f"{last}{MERGE_MARK}000001{segments.SEGMENT_SUFFIX}"


def _batches(files: list[Path], target_bytes: int) -> Iterator[list[Path]]:
    """Consecutive runs of files adding up to about `target_bytes` each."""
    batch: list[Path] = []
    size = 0
    for path, file_size in ((p, p.stat().st_size) for p in files):
        if batch and size + file_size > target_bytes:
            yield batch
            batch, size = [], 0
        batch.append(path)
        size += file_size
    if batch:
        yield batch


def _small_segments(
    segments_root: Path, scheduled: set[str], small_bytes: int, min_age_s: float, now: float
) -> dict[Path, list[Path]]:
    """Per partition, the segments worth merging, oldest first."""
    found: dict[Path, list[tuple[float, Path]]] = {}
    for path in segments.segment_files(segments_root):
        if str(path.relative_to(segments_root)) in scheduled:
            continue
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        if stat.st_size < small_bytes and now - stat.st_mtime >= min_age_s:
            found.setdefault(path.parent, []).append((stat.st_mtime, path))
    return {partition: [p for _, p in sorted(files)] for partition, files in found.items()}


def compact(
    segments_root: Path,
    *,
    min_segments: int = 8,
    small_bytes: int = SMALL_BYTES,
    target_bytes: int = TARGET_BYTES,
    row_group_rows: int = ROW_GROUP_ROWS,
    min_age_s: float = 0.0,
    grace_s: float = DEFAULT_GRACE_S,
    lock_timeout_s: float = 30.0,
    clock: Clock = time.time,
) -> CompactionResult:
    """Merges runs of at least `min_segments` small segments per partition into one segment each.

    The merged segment is durable and visible before its sources are scheduled for deletion; they are
    deleted by a later pass once `grace_s` passed (by this one when grace_s is 0) and no registered reader
    is reading. Raises CompactionBusy when another process holds the lock for longer than `lock_timeout_s`.
    """
    result = CompactionResult()
    with maintenance_lock(segments_root, lock_timeout_s):
        manifest = _Manifest(segments_root)
        result.deleted_files += _sweep(segments_root, manifest, clock())
        segments.remove_stale_tmp(segments_root)
        now = time.time()  # against the files' modification times, which the system clock wrote
        candidates = _small_segments(segments_root, manifest.scheduled(), small_bytes, min_age_s, now)
        for partition, files in candidates.items():
            for batch in _batches(files, target_bytes):
                if len(batch) < min_segments:
                    continue
                tmp = segments.tmp_path(partition / merged_name(batch))
                try:
                    merged, rows = _merge(batch, tmp, row_group_rows)
                    if len(merged) < 2:
                        tmp.unlink()
                        continue
                    output = partition / merged_name(merged)  # a source it skipped keeps its own name
                    entry = _Entry(
                        sources=[str(p.relative_to(segments_root)) for p in merged],
                        delete_after_unix=clock() + grace_s,
                        output=str(output.relative_to(segments_root)),
                        published=False,
                    )
                    manifest.entries.append(entry)
                    manifest.save()  # the intent first: a crash after the rename still deletes the sources
                    segments.publish(tmp, output)
                except BaseException:
                    tmp.unlink(missing_ok=True)
                    raise
                entry.published = True
                manifest.save()
                result.merged_segments += 1
                result.replaced_segments += len(merged)
                result.rows += rows
                result.partitions.append(partition.name)
        if grace_s <= 0:
            result.deleted_files += _sweep(segments_root, manifest, clock())
        result.pending_files = manifest.pending_files()
    return result


def merged_outputs(segments_root: Path) -> set[Path]:
    """The merged segments whose sources are still in the store: new files that hold only copies stored in
    other segments too (the derived state reads their newest copies only, not all of them). A merge whose
    sources are all gone is not one, although its entry may still name it (a sweep that deleted them and died
    before rewriting the manifest): its copies are in no other file."""
    path = segments_root / MANIFEST
    try:
        entries = json.loads(path.read_text()).get("entries", [])
    except (FileNotFoundError, ValueError):
        return set()
    return {
        segments_root / entry["output"]
        for entry in entries
        if entry.get("output") and any((segments_root / name).exists() for name in entry.get("sources", []))
    }


def expired_partitions(segments_root: Path, max_age_s: float, now: float) -> list[Path]:
    """Partitions whose whole day ended more than `max_age_s` before `now`."""
    cutoff = dt.datetime.fromtimestamp(now - max_age_s, tz=dt.UTC)
    expired = []
    for directory in sorted(segments_root.iterdir()):
        day = segments.partition_day(directory)
        if day is None or not directory.is_dir():
            continue
        day_end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
        if day_end <= cutoff:
            expired.append(directory)
    return expired


def apply_retention(
    segments_root: Path,
    max_age_s: float,
    *,
    grace_s: float = DEFAULT_GRACE_S,
    lock_timeout_s: float = 30.0,
    clock: Clock = time.time,
) -> int:
    """Schedules every segment of the expired partitions for deletion after `grace_s`; returns the partitions.

    The placeholder segment stays, so the views still bind on a store whose data all expired.
    """
    dropped = 0
    with maintenance_lock(segments_root, lock_timeout_s):
        manifest = _Manifest(segments_root)
        now = clock()
        _sweep(segments_root, manifest, now)
        already = {name for entry in manifest.entries if entry.output is None for name in entry.sources}
        placeholder = segments_root / segments.PLACEHOLDER
        for directory in expired_partitions(segments_root, max_age_s, now):
            files = [
                str(p.relative_to(segments_root))
                for p in sorted(directory.glob(f"*{segments.SEGMENT_SUFFIX}"))
                if p != placeholder
            ]
            files = [name for name in files if name not in already]
            if files:
                manifest.entries.append(_Entry(sources=files, delete_after_unix=now + grace_s))
                dropped += 1
        if dropped:
            manifest.save()
        if grace_s <= 0:
            _sweep(segments_root, manifest, clock())
    return dropped
