"""Where segment files live and how one is made durable: the layout shared by the writer and the compactor.

A segment becomes visible only by an atomic rename after its bytes and its directory entry are on
disk, so a reader (or a crash) never meets half a file: temporary files carry a name the segment glob
does not match.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from turnlens.kernel.layout import PARTITION_PREFIX, SEGMENT_SUFFIX, SEGMENTS_DIR  # noqa: F401 (the collector's names for them)
from turnlens.kernel.schema import SEGMENT_SCHEMA

# A zero-row segment in a partition no real span falls into, so a fresh store's views bind.
PLACEHOLDER = Path("date=1970-01-01") / "empty.parquet"
# Fresh segments favour the writer's CPU (it shares a core with decoding); compaction rewrites them
# with zstd, about half the bytes of lz4 for ~30 % more CPU (measured: docs/benchmarks.md).
HOT_COMPRESSION = "lz4"
COLD_COMPRESSION = "zstd"
# Min/max statistics only where a reader filters (row groups skipped by time, id, session); on the
# JSON and nested columns they cost CPU and help no query.
STATISTICS_COLUMNS = [
    "trace_id", "span_id", "start_time_unix_nano", "service_name", "node",
    "span_session_id", "span_turn_id", "layer", "hlc", "received_unix_nano",
]
# Dictionary encoding where values repeat across spans; ids, times and attribute JSON rarely do.
DICTIONARY_COLUMNS = [
    "trace_id", "trace_state", "name", "kind", "status_code", "status_message",
    "resource_attributes", "resource_schema_url", "scope_name", "scope_version", "scope_attributes",
    "scope_schema_url", "service_name", "node", "span_session_id", "span_turn_id", "layer",
]


def parquet_options(compression: str) -> dict[str, object]:
    """Keyword arguments for pyarrow's Parquet writers, shared by fresh and compacted segments."""
    return {
        "compression": compression,
        "write_statistics": STATISTICS_COLUMNS,
        "use_dictionary": DICTIONARY_COLUMNS,
    }
# How old a temporary file of a process we cannot see (another host) must be before we remove it.
STALE_TMP_AGE_S = 3600.0

NS_PER_DAY = 86_400 * 1_000_000_000
EPOCH = dt.date(1970, 1, 1)
_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<host>[A-Za-z0-9-]*)\.(?P<pid>\d+)\.tmp$")
_UNSAFE = re.compile(r"[^A-Za-z0-9-]+")


def host_tag() -> str:
    """This machine's name reduced to letters, digits and dashes, so it fits in a file name."""
    return _UNSAFE.sub("-", socket.gethostname()).strip("-") or "host"


def partition_name(day: dt.date) -> str:
    """The Hive partition directory of one UTC day: `date=YYYY-MM-DD`."""
    return f"{PARTITION_PREFIX}{day.isoformat()}"


def partition_day(directory: Path) -> dt.date | None:
    """The day a partition directory holds, or None for anything that is not a partition."""
    if not directory.name.startswith(PARTITION_PREFIX):
        return None
    try:
        return dt.date.fromisoformat(directory.name.removeprefix(PARTITION_PREFIX))
    except ValueError:
        return None


def tmp_path(final: Path) -> Path:
    """A name beside `final` that the segment glob ignores and that says which process wrote it."""
    return final.with_name(f".{final.name}.{host_tag()}.{os.getpid()}.tmp")


def fsync_dir(directory: Path) -> None:
    """Makes the directory's entries (a rename, a new file, a removal) survive a crash."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(directory: Path) -> None:
    """Creates `directory` (and parents) and makes its entry in the parent durable."""
    if directory.is_dir():
        return
    directory.mkdir(parents=True, exist_ok=True)
    fsync_dir(directory.parent)


def publish(tmp: Path, final: Path) -> None:
    """Makes a fully written temporary file visible under its final name, durably."""
    fsync_file(tmp)
    os.rename(tmp, final)
    fsync_dir(final.parent)


def write_segment(
    table: pa.Table, final: Path, compression: str = HOT_COMPRESSION, row_group_rows: int | None = None
) -> int:
    """Writes `table` as the segment `final` (temporary name, fsync, rename, fsync dir); returns its bytes."""
    tmp = tmp_path(final)
    for attempt in (1, 2):
        try:
            ensure_dir(final.parent)
            # By path, not a Python file object: Arrow's native writer releases the GIL while it encodes.
            pq.write_table(table, str(tmp), row_group_size=row_group_rows, **parquet_options(compression))
            break
        except FileNotFoundError:
            # Retention may have removed an emptied partition directory between ensure_dir and open.
            tmp.unlink(missing_ok=True)
            if attempt == 2:
                raise
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    try:
        size = tmp.stat().st_size
        publish(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return size


def ensure_layout(segments_root: Path) -> None:
    """Creates the segments directory and the zero-row placeholder segment, once."""
    placeholder = segments_root / PLACEHOLDER
    if not placeholder.exists():
        write_segment(SEGMENT_SCHEMA.empty_table(), placeholder)


# A compacted segment is sorted by trace_id in row groups of this many rows: a reader looking for a few traces
# (one turn's timeline) skips every row group whose min/max trace_id cannot hold them, instead of reading the
# trace_id of every row of the store.
LOOKUP_ROW_GROUP_ROWS = 16 * 1024


def write_sorted_segment(table: pa.Table, final: Path, compression: str = COLD_COMPRESSION) -> int:
    """Writes `table` sorted by trace_id, in LOOKUP_ROW_GROUP_ROWS row groups, as `write_segment` does."""
    return write_segment(table.sort_by("trace_id"), final, compression, row_group_rows=LOOKUP_ROW_GROUP_ROWS)


def split_by_day(table: pa.Table) -> list[tuple[dt.date, pa.Table]]:
    """The rows of `table` grouped by the UTC day they were received (unknown or pre-1970: 1970-01-01).

    The partition is the day of receipt, not of span start: a span's start time is whatever its sender
    says, so partitioning by it let one small request of spans on 2,000 different days create 2,000
    partitions (2,000 fsynced files before the answer, and every later scan opening them all). A write
    covers at most the days its requests were received on: one, or two across midnight.
    """
    received = pc.max_element_wise(pc.fill_null(table["received_unix_nano"], 0), 0)
    days = pc.divide(received, NS_PER_DAY)
    low, high = pc.min_max(days).values()
    if low == high:
        return [(EPOCH + dt.timedelta(days=low.as_py()), table)]
    return [
        (EPOCH + dt.timedelta(days=day), table.filter(pc.equal(days, day)))
        for day in sorted(pc.unique(days).to_pylist())
    ]


def segment_files(segments_root: Path) -> Iterator[Path]:
    """Every visible segment file (what the glob matches), the placeholder excluded."""
    placeholder = segments_root / PLACEHOLDER
    for directory in sorted(segments_root.iterdir()) if segments_root.is_dir() else ():
        if directory.is_dir() and partition_day(directory) is not None:
            for path in sorted(directory.glob(f"*{SEGMENT_SUFFIX}")):
                if path != placeholder and not path.name.startswith("."):
                    yield path


def pid_alive(pid: int) -> bool:
    """Whether a process of this host still runs under `pid` (a temporary file it named is still its own)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def remove_stale_tmp(segments_root: Path) -> int:
    """Removes temporary files left by crashed writers: of a dead process on this host, or very old ones."""
    removed = 0
    host = host_tag()
    now = time.time()
    found = [*segments_root.glob(".*.tmp"), *segments_root.glob("*/.*.tmp")] if segments_root.is_dir() else []
    for path in found:
        match = _TMP.match(path.name)
        try:
            if match and match["host"] == host:
                stale = int(match["pid"]) != os.getpid() and not pid_alive(int(match["pid"]))
            else:
                stale = now - path.stat().st_mtime > STALE_TMP_AGE_S
            if stale:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed
