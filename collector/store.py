"""The span store: Parquet segments written by group commit, so a collector acknowledges only durable spans.

Many request threads call `Store.append`; one writer thread gathers what arrived, writes it as one
segment per UTC day of receipt (temporary name, fsync, rename, fsync directory) and only then wakes
the callers whose rows it held. Readers see a segment as soon as it is renamed; DuckDB reads them through the
glob `segments_glob`. Compaction and retention live in compaction.py.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from turnlens.collector import compaction, leases, segments
from turnlens.collector.compaction import Clock, CompactionResult
from turnlens.kernel import layout
from turnlens.kernel.schema import SEGMENT_SCHEMA

_WRITER_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
ACTIVE_WINDOW_S = 1.0  # an appender counts as active this long after its latest append


# Called with (store directory, segments glob) once a store is open, to make it readable: the composition
# of the program passes the queries' catalog writer, which the collector cannot import.
PrepareStore = Callable[[Path, str], object]


class StoreOverloaded(Exception):
    """The backlog of appended but not yet durable rows is full: nothing of this append was stored."""

    def __init__(self, retry_after_s: float, backlog_rows: int) -> None:
        super().__init__(f"store backlog full ({backlog_rows} rows waiting); retry in {retry_after_s:.1f} s")
        self.retry_after_s = retry_after_s
        self.backlog_rows = backlog_rows


class StoreClosed(Exception):
    """The store was closed: it accepts no more rows."""


class StoreWriteError(Exception):
    """Writing the segment that held these rows failed (disk full, permissions): they are not acknowledged."""


@dataclass
class StoreStats:
    """Counters of one Store since it was opened, for the collector's log and the benchmarks."""

    segments_written: int = 0
    rows_written: int = 0
    bytes_written: int = 0
    appends: int = 0
    overloaded: int = 0
    write_errors: int = 0
    write_seconds: float = 0.0  # wall time inside segment writes, fsyncs included
    backlog_rows: int = 0


@dataclass
class _Group:
    """Appends that are written together and acknowledged together."""

    tables: list[pa.Table] = field(default_factory=list)
    callers: int = 0
    rows: int = 0
    nbytes: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


def default_writer_id() -> str:
    """hostname-pid-random: unique across processes, machines and restarts."""
    return f"{segments.host_tag()}-{os.getpid()}-{secrets.token_hex(3)}"


class Store:
    """A directory of Hive-partitioned Parquet segments; `append` returns once the rows are durable.

    Options:
      flush_interval_s: segment writes start at most this often, so under load many appends share
        one segment, while an append to an idle store is written at once. It is also the longest an
        append waits before its write starts (unless the previous write takes longer).
      early_rows: a write of at least this many rows starts before the interval is over when every
        thread that appended in the last second is waiting for one: no one else is coming (a lone
        importer, or exporters that each wait for their answer). Below it, the interval applies, so
        a few senders of tiny requests cannot make a segment per request.
      flush_rows: write at once, whatever the interval, when this many rows are waiting.
      compression: of fresh segments (compaction rewrites them with zstd).
      max_backlog_rows / max_backlog_bytes: rows (Arrow bytes) appended but not yet durable; past
        either, append raises StoreOverloaded. A single append larger than the limit is accepted when
        nothing else waits, so memory is bounded by the limit plus one request.
      grace_s: how long replaced segments stay on disk after compaction or retention before they are
        deleted (at a moment no registered reader is reading, see leases.py), for readers that do not
        register, such as an analyst's own DuckDB session.
      clock: the wall clock that grace periods are measured on (tests pass their own).

    Compaction and retention run when called (`turnlens compact`, which the collector starts on a timer in
    a child process so the merge's memory is never the collector's).
    """

    def __init__(
        self,
        root: Path,
        *,
        writer_id: str | None = None,
        flush_interval_s: float = 0.05,
        flush_rows: int = 16_384,
        early_rows: int = 512,
        compression: str = segments.HOT_COMPRESSION,
        max_backlog_rows: int = 200_000,
        max_backlog_bytes: int = 256 * 1024 * 1024,
        grace_s: float = compaction.DEFAULT_GRACE_S,
        clock: Clock = time.time,
    ) -> None:
        self.root = layout.check_store_path(root)  # before anything is written there
        self.writer_id = writer_id or default_writer_id()
        if not _WRITER_ID.match(self.writer_id):
            raise ValueError(f"writer_id may hold only letters, digits, '_', '.', '-': {self.writer_id!r}")
        self.flush_interval_s = flush_interval_s
        self.flush_rows = flush_rows
        self.early_rows = early_rows
        self.compression = compression
        self.max_backlog_rows = max_backlog_rows
        self.max_backlog_bytes = max_backlog_bytes
        self.grace_s = grace_s
        self.clock = clock
        self.stats = StoreStats()

        self.segments_root = self.root / layout.SEGMENTS_DIR
        self.segments_root.mkdir(parents=True, exist_ok=True)
        segments.ensure_layout(self.segments_root)
        segments.remove_stale_tmp(self.segments_root)
        leases.ensure_lock_file(self.root)

        self._seq = itertools.count(1)
        self._cond = threading.Condition()
        self._open: _Group | None = None  # accepting appends
        self._backlog_rows = 0  # open group + the group being written
        self._backlog_bytes = 0
        self._last_write_at = -float("inf")  # monotonic start of the latest segment write
        self._appenders: dict[int, float] = {}  # thread ident -> monotonic time of its latest append
        self._flush_requested = False
        self._closed = False
        self._in_flight: _Group | None = None  # taken by the writer, not yet durable
        self._rows_per_s = 100_000.0  # smoothed write rate, for the retry hint
        self._writer = threading.Thread(target=self._write_loop, name="store-writer", daemon=True)
        self._writer.start()

    # --- reading side -------------------------------------------------------------------------

    @property
    def segments_glob(self) -> str:
        """Absolute glob over every segment file; temporary files never match it."""
        return layout.segments_glob(self.root)

    # --- writing side -------------------------------------------------------------------------

    def append(self, table: pa.Table) -> None:
        """Stores the rows of `table` (SEGMENT_SCHEMA); returns once they are durable.

        Raises StoreOverloaded (nothing stored) when the backlog is full, StoreClosed after close(),
        StoreWriteError when the segment could not be written.
        """
        table = _conform(table)
        if table.num_rows == 0:
            return
        rows, nbytes = table.num_rows, table.nbytes
        with self._cond:
            if self._closed:
                raise StoreClosed("the store is closed")
            if self._backlog_rows and (
                self._backlog_rows + rows > self.max_backlog_rows
                or self._backlog_bytes + nbytes > self.max_backlog_bytes
            ):
                self.stats.overloaded += 1
                raise StoreOverloaded(self._retry_hint(), self._backlog_rows)
            group = self._open
            if group is None:
                group = self._open = _Group()
                self._cond.notify_all()
            group.tables.append(table)
            group.callers += 1
            group.rows += rows
            group.nbytes += nbytes
            self._backlog_rows += rows
            self._backlog_bytes += nbytes
            self.stats.appends += 1
            self._appenders[threading.get_ident()] = time.monotonic()
            if group.rows >= self.flush_rows or self._early(group, time.monotonic()):
                self._cond.notify_all()
        group.done.wait()
        if group.error is not None:
            raise StoreWriteError(f"segment write failed: {group.error}") from group.error

    def flush(self) -> None:
        """Writes what was appended so far without waiting for the flush interval; returns once durable."""
        with self._cond:
            group = self._open
            if group is None:
                group = self._in_flight
            else:
                self._flush_requested = True
                self._cond.notify_all()
        if group is not None:
            group.done.wait()

    def close(self) -> None:
        """Writes what was appended and stops the writer. Idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._writer.join()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- maintenance --------------------------------------------------------------------------

    def compact(
        self,
        *,
        min_segments: int = 8,
        small_bytes: int = compaction.SMALL_BYTES,
        target_bytes: int = compaction.TARGET_BYTES,
        min_age_s: float = 0.0,
        grace_s: float | None = None,
        lock_timeout_s: float = 30.0,
    ) -> CompactionResult:
        """Merges small segments of each date partition into larger ones; see compaction.compact."""
        return compaction.compact(
            self.segments_root,
            min_segments=min_segments,
            small_bytes=small_bytes,
            target_bytes=target_bytes,
            min_age_s=min_age_s,
            grace_s=self.grace_s if grace_s is None else grace_s,
            lock_timeout_s=lock_timeout_s,
            clock=self.clock,
        )

    def apply_retention(
        self, max_age_s: float, *, grace_s: float | None = None, lock_timeout_s: float = 30.0
    ) -> int:
        """Drops the date partitions whose spans were all received over `max_age_s` ago; returns how many.

        Their files leave the disk after the grace period, on a later compaction or retention pass.
        """
        return compaction.apply_retention(
            self.segments_root,
            max_age_s,
            grace_s=self.grace_s if grace_s is None else grace_s,
            lock_timeout_s=lock_timeout_s,
            clock=self.clock,
        )

    # --- the writer thread --------------------------------------------------------------------

    def _next_segment_name(self) -> str:
        return f"{self.writer_id}-{next(self._seq):08d}{segments.SEGMENT_SUFFIX}"

    def _retry_hint(self) -> float:
        return min(30.0, max(0.1, self._backlog_rows / max(self._rows_per_s, 1.0)))

    def _early(self, group: _Group, now: float) -> bool:
        """True when `group` is worth writing now: enough rows, and every recent appender waits."""
        return group.rows >= self.early_rows and self._everyone_waits(now)

    def _everyone_waits(self, now: float) -> bool:
        """True when every thread that appended within the last second is blocked in append now."""
        recent = now - ACTIVE_WINDOW_S
        for ident in [i for i, at in self._appenders.items() if at < recent]:
            del self._appenders[ident]
        waiting = sum(group.callers for group in (self._open, self._in_flight) if group is not None)
        return waiting >= len(self._appenders)

    def _due(self, group: _Group, now: float) -> float:
        """Seconds until `group` must be written (0 or less: now)."""
        if self._closed or self._flush_requested or group.rows >= self.flush_rows:
            return 0.0
        if self._early(group, now):
            return 0.0
        return self._last_write_at + self.flush_interval_s - now

    def _take_group(self) -> _Group | None:
        """Waits until the open group is due, then takes it; None once closed with nothing left."""
        with self._cond:
            while True:
                group = self._open
                if group is None:
                    if self._closed:
                        return None
                    self._cond.wait()
                    continue
                now = time.monotonic()
                wait = self._due(group, now)
                if wait <= 0:
                    self._last_write_at = now
                    self._open = None
                    self._flush_requested = False
                    self._in_flight = group
                    return group
                self._cond.wait(wait)

    def _write_loop(self) -> None:
        while (group := self._take_group()) is not None:
            started = time.monotonic()
            try:
                written = self._write_group(group)
            except BaseException as exc:  # noqa: BLE001 - handed to every caller of the group
                group.error = exc
                written = 0
            elapsed = time.monotonic() - started
            with self._cond:
                self._in_flight = None
                self._backlog_rows -= group.rows
                self._backlog_bytes -= group.nbytes
                self.stats.backlog_rows = self._backlog_rows
                self.stats.write_seconds += elapsed
                if group.error is None:
                    self.stats.rows_written += group.rows
                    self.stats.bytes_written += written
                    rate = group.rows / max(elapsed, 1e-3)
                    self._rows_per_s = 0.8 * self._rows_per_s + 0.2 * rate
                else:
                    self.stats.write_errors += 1
            group.done.set()

    def _write_group(self, group: _Group) -> int:
        """One segment per UTC day of receipt, each durable before the group is acknowledged."""
        table = pa.concat_tables(group.tables)
        written = 0
        for day, rows in segments.split_by_day(table):
            final = self.segments_root / segments.partition_name(day) / self._next_segment_name()
            written += segments.write_segment(rows, final, self.compression)
            self.stats.segments_written += 1
        return written


def _conform(table: pa.Table) -> pa.Table:
    """`table` in SEGMENT_SCHEMA, or ValueError: a segment must be readable beside every other one."""
    if table.schema.equals(SEGMENT_SCHEMA, check_metadata=False):
        return table
    if table.schema.names != SEGMENT_SCHEMA.names:
        raise ValueError(
            "append expects collector.schema.SEGMENT_SCHEMA columns; got " + ", ".join(table.schema.names)
        )
    return table.cast(SEGMENT_SCHEMA)
