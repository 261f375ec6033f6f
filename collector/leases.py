"""Reader leases: a file the store replaced is deleted only at a moment no registered reader is reading.

A reader lists files (a glob, a catalogue naming a snapshot) and opens them later, so deleting a replaced
file between the two makes its query fail. Every reader that goes through turnlens (a dashboard query, an
alert evaluation, an export, `turnlens query`, a materialise run) holds a shared flock on
`STORE/readers.lock` from before it lists anything until it has read everything; compaction, retention and
snapshot replacement delete only under an exclusive flock on the same file. Readers that keep overlapping
would starve a deleter, so a reader first passes a turnstile (`STORE/readers.gate`) that a deleter closes
while it waits for the readers inside to finish: new readers wait a moment, the store quiesces, the files
go. A deleter waits a bounded time and otherwise leaves the deletion to its next pass; a reader that runs for
minutes (a materialise run) says so (`long=True`), and a deleter that finds one inside does not close the
turnstile at all. A flock belongs to its open file, so a reader that dies releases its
lease with it and nothing stale is left to clean up. Readers that do not register (an analyst in plain
DuckDB) are covered by the grace period retired files wait before any deletion.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK = "readers.lock"
GATE = "readers.gate"
LONG = "readers.long"  # held (shared) besides the lease by readers that run for minutes: a materialise run
READER_WAIT_S = 10.0  # a deleter holds the lock only while it unlinks; past this, a reader reads unregistered
DELETER_WAIT_S = 2.0  # a deletion waits this long for the readers inside to finish, else a later pass deletes
_POLL_S = 0.01
# how many leases this thread holds: a nested one (a catalogue rewrite inside a materialise run) skips the
# turnstile, which a deleter waiting for the outer one may have closed
_held = threading.local()


def ensure_lock_file(store_dir: Path) -> None:
    """Creates the lock files, so readers without write access to the store can still take a lease."""
    for name in (LOCK, GATE, LONG):
        path = store_dir / name
        if not path.exists():
            try:
                path.touch()
            except OSError:
                pass  # a read-only store: its readers read unregistered, covered by the grace period


def _try_flock(fd: int, operation: int, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)


@contextmanager
def reading(store_dir: Path, *, wait_s: float = READER_WAIT_S, long: bool = False) -> Iterator[bool]:
    """Holds a reader lease on the store for the block; yields whether it is held.

    Nothing the reader lists inside the block is deleted before the block ends. The lease is not held (False)
    when the store has no lock files the reader can open, or when a deleter kept them longer than `wait_s`;
    the read still goes on, protected by the grace period and the caller's retry. `long` marks a block that
    may last minutes, so deleters do not stall other readers waiting for it.
    """
    if long:
        with _long_reader(store_dir), reading(store_dir, wait_s=wait_s) as held:
            yield held
        return
    try:
        gate = os.open(store_dir / GATE, os.O_RDONLY)
    except OSError:
        yield False
        return
    try:
        lock = os.open(store_dir / LOCK, os.O_RDONLY)
    except OSError:
        os.close(gate)
        yield False
        return
    try:
        deadline = time.monotonic() + wait_s
        depth = getattr(_held, "depth", 0)
        passed = depth > 0 or _try_flock(gate, fcntl.LOCK_SH, wait_s)
        os.close(gate)  # through the turnstile (or not): it is not held while reading
        held = passed and _try_flock(lock, fcntl.LOCK_SH, max(0.0, deadline - time.monotonic()))
        _held.depth = depth + held
        try:
            yield held
        finally:
            _held.depth = depth
    finally:
        os.close(lock)  # releases the lease


@contextmanager
def no_readers(store_dir: Path, *, wait_s: float | None = None) -> Iterator[bool]:
    """Yields True while no registered reader is reading the store (and none can start), False when readers
    were still inside after `wait_s` (default DELETER_WAIT_S): the caller deletes only on True. New readers
    wait at the turnstile meanwhile, so readers that keep overlapping cannot put a deletion off for ever."""
    wait_s = DELETER_WAIT_S if wait_s is None else wait_s
    ensure_lock_file(store_dir)
    if _long_reader_inside(store_dir):
        yield False
        return
    gate = os.open(store_dir / GATE, os.O_RDONLY)
    lock = os.open(store_dir / LOCK, os.O_RDONLY)
    try:
        closed = _try_flock(gate, fcntl.LOCK_EX, wait_s)  # another deleter may hold it
        yield closed and _try_flock(lock, fcntl.LOCK_EX, wait_s)
    finally:
        os.close(lock)
        os.close(gate)


@contextmanager
def _long_reader(store_dir: Path) -> Iterator[None]:
    try:
        fd = os.open(store_dir / LONG, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        _try_flock(fd, fcntl.LOCK_SH, READER_WAIT_S)  # a deleter only tests it, for an instant
        yield
    finally:
        os.close(fd)


def _long_reader_inside(store_dir: Path) -> bool:
    fd = os.open(store_dir / LONG, os.O_RDONLY)
    try:
        return not _try_flock(fd, fcntl.LOCK_EX, 0.0)
    finally:
        os.close(fd)  # releases the test at once


def remove(paths: Iterable[Path]) -> int:
    """Deletes files and folders (a snapshot generation is a folder); returns how many existed."""
    removed = 0
    for path in paths:
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed += 1
        except FileNotFoundError:
            continue
    return removed
