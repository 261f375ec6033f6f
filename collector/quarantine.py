"""Quarantine: a segment file that cannot be read is moved aside, so one bad file never takes the store down.

Unreadable means a footer or pages that do not read, or columns other than the segment schema's (a Parquet
file of another program copied into segments/): the views read every segment with the columns of one.

Every view reads every segment through one glob, so a single truncated or corrupt `.parquet` made every live
query, export, materialisation and alert rule fail. A file found unreadable is moved to `DIR/quarantine/`
(same partition path, kept for forensics, outside every glob), the move is logged, and a line is appended to
`segments/_quarantine.jsonl`, which the `quarantined_segments` view reads and the dashboard's Overview shows.

Who finds one: any reader whose query fails (`retrying` sweeps and runs the read once more), and the
compactor before it merges (a bad source would fail every pass). A sweep reads only
footers (a few kB a file); a file a failed query names is read whole, which also finds corrupt pages.
This module imports no query code: readers in queries/, dashboard/ and alerts call into it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from turnlens.collector import segments
from turnlens.kernel import layout
from turnlens.kernel.schema import SEGMENT_SCHEMA

T = TypeVar("T")
log = logging.getLogger("turnlens.quarantine")

QUARANTINE_DIR = layout.QUARANTINE_DIR  # DIR/quarantine/<partition>/<file>: beside segments/, in no glob
LOG_FILE = layout.QUARANTINE_LOG  # in segments/, where the views (and the dashboard's allowed folders) reach
_NAMED_FILE = re.compile(r"""['"]?(/[^'"\s]+\.parquet)['"]?""")


def log_path(segments_root: Path) -> Path:
    return segments_root / LOG_FILE


def ensure_log(segments_root: Path) -> Path:
    """Creates the (empty) quarantine log, so the view that reads it binds on a store that never needed it."""
    path = log_path(segments_root)
    if not path.exists():
        segments.ensure_dir(segments_root)
        path.touch()
    return path


def footer_problem(path: Path) -> str | None:
    """Why the file's Parquet footer cannot be read (truncated, not Parquet) or names other columns than the
    segment schema's, or None when it reads and names those."""
    try:
        names = pq.read_metadata(path).schema.to_arrow_schema().names
    except FileNotFoundError:
        return None  # compaction or retention removed it meanwhile: nothing to quarantine
    except (OSError, pa.ArrowException) as exc:
        return str(exc) or type(exc).__name__
    return _columns_problem(names)


def _columns_problem(names: list[str]) -> str | None:
    """Why a file with these columns cannot be read beside the segments, or None. The views read segments
    without unifying their schemas (queries/base/spans.sql): one file's columns name every file's, so a
    column missing from one fails every read of it, and a column only one file has is never read."""
    expected = SEGMENT_SCHEMA.names
    missing = [name for name in expected if name not in names]
    extra = [name for name in names if name not in expected]
    if not missing and not extra:
        return None

    def listed(columns: list[str]) -> str:  # a reason is kept to 500 characters
        return ", ".join(columns[:5]) + (f" and {len(columns) - 5} more" if len(columns) > 5 else "")

    parts = [f"has {listed(extra)}, which the segment schema does not have"] if extra else []
    parts += [f"lacks {listed(missing)}"] if missing else []
    return "not the segment schema's columns: " + "; ".join(parts)


def content_problem(path: Path) -> str | None:
    """Why the whole file cannot be read (a bad footer, or corrupt pages), or None when every row reads."""
    problem = footer_problem(path)
    if problem is not None or not path.exists():
        return problem
    try:
        pq.read_table(path)
    except FileNotFoundError:
        return None
    except (OSError, pa.ArrowException) as exc:
        return str(exc) or type(exc).__name__
    return None


def quarantine(store_dir: Path, path: Path, reason: str) -> Path | None:
    """Moves one segment file to DIR/quarantine/ and logs why; None when another process moved it first."""
    segments_root = store_dir / segments.SEGMENTS_DIR
    relative = path.resolve().relative_to(segments_root.resolve())
    target = store_dir / QUARANTINE_DIR / relative
    if target.exists():  # the same name quarantined before: keep both
        target = target.with_name(f"{target.stem}.{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S%f}{target.suffix}")
    segments.ensure_dir(target.parent)
    try:
        size = path.stat().st_size
        os.rename(path, target)
    except FileNotFoundError:
        return None
    segments.fsync_dir(target.parent)
    segments.fsync_dir(path.parent)
    record = {
        "segment": str(relative),
        "moved_to": str(target.relative_to(store_dir)),
        "bytes": size,
        "reason": reason[:500],
        "quarantined_at": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
    }
    _append(log_path(segments_root), record)
    log.warning("quarantined unreadable segment %s -> %s: %s", relative, record["moved_to"], reason)
    if relative == segments.PLACEHOLDER:
        segments.ensure_layout(segments_root)  # a fresh store's views need the zero-row placeholder
    return target


def _append(path: Path, record: dict[str, object]) -> None:
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def sweep(store_dir: Path) -> list[Path]:
    """Quarantines every segment whose footer cannot be read; returns where they went."""
    segments_root = store_dir / segments.SEGMENTS_DIR
    if not segments_root.is_dir():
        return []
    moved = []
    for path in [segments_root / segments.PLACEHOLDER, *segments.segment_files(segments_root)]:
        problem = footer_problem(path) if path.exists() else None
        if problem is not None:
            target = quarantine(store_dir, path, problem)
            if target is not None:
                moved.append(target)
    return moved


def recover(store_dir: Path, error: BaseException) -> list[Path]:
    """After a failed read: quarantines the segment files the error names if they do not read whole, and
    every segment whose footer does not read. Returns what was moved (empty: the error had another cause)."""
    segments_root = (store_dir / segments.SEGMENTS_DIR).resolve()
    moved = []
    for name in dict.fromkeys(_NAMED_FILE.findall(str(error))):
        path = Path(name)
        if path.is_relative_to(segments_root) and path.is_file():
            problem = content_problem(path)
            target = quarantine(store_dir, path, problem) if problem is not None else None
            if target is not None:
                moved.append(target)
    return moved + sweep(store_dir)


def retrying(store_dir: Path, read: Callable[[], T], *, unless: tuple[type[Exception], ...] = ()) -> T:
    """`read()`, and once more after quarantining, when it failed on an unreadable segment of `store_dir`.

    Errors of the `unless` types cannot come from a segment (a view missing from an old catalog): they
    are raised as they are, without looking at the segments.
    """
    try:
        return read()
    except unless:
        raise
    except Exception as exc:
        if not recover(store_dir, exc):
            raise
    return read()
