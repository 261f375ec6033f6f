"""The collector's maintenance in child processes: `turnlens compact` on a timer, and one long-lived
`turnlens materialize --every`; and a thread that deletes replaced files in the pauses of the store's readers.

Children, not threads: compaction holds a batch of segments in memory to sort it, and the derived state's
DuckDB work takes a core for a second at a time (and up to its memory limit in a full build); the collector's
own memory and its answers to exporters must depend on neither. The children run at a lower CPU priority
than the collector (compaction at nice 10, the materialiser at nice 3: its speed is the views' freshness); a
run still going when the next is due is not doubled, and a child that finds another process maintaining the
store (exit 75) waits for the next interval. The materialiser refreshes every second or so in one process
(starting an interpreter per refresh would cost as much as the refresh); when it exits it is started again
after the interval.

A child dies with the collector: it asks the Linux kernel for SIGKILL when the thread that started it exits
(PR_SET_PDEATHSIG), so a `kill -9` of the collector leaves no compaction or materialiser running on
without it (a new collector on the same store would start its own). Elsewhere the children outlive a killed
collector until their run ends; the long-lived materialiser checks for its parent between refreshes
(`PARENT_PID_ENV`).

What compaction and the materialiser replaced is deleted only at a moment no registered reader holds a lease
(collector/compaction.py, sweep), and the materialiser refreshes back to back under a long lease, with pauses
of a second or less between its runs: a compaction pass every few minutes seldom falls in one, and replaced
files piled up (220 segment files after ten minutes of `turnlens demo`). So the collector also looks for a
pause twice a second (`ReplacedSweeper`); a look costs a lock and a small manifest read, and deletes only what
is past its grace period.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from turnlens.collector import compaction

NICE = 10  # compaction: bulk work that may wait
# the materialiser: its speed is how fresh the per-turn views are, and on a busy host a process at nice 10
# gets about a tenth of a fair share (CFS weight 110 against 1024): measured, 0.03 CPU-s per second beside a
# load of 11-16, so its first run never ended; nice 3 (weight 526) still yields to the collector's threads
MATERIALIZE_NICE = 3
BUSY = 75  # EX_TEMPFAIL: another process holds the store's maintenance or snapshot lock
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
SWEEP_EVERY_S = 0.5
SWEEP_BACKOFF_S = 5.0  # after a look that waited for readers to finish: pages are not held back often
PARENT_PID_ENV = "TURNLENS_PARENT_PID"  # set for a child: the collector's pid, which it may check is alive


def _prctl() -> Callable[..., int] | None:
    """libc's prctl on Linux, None elsewhere (or where libc cannot be loaded)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    prctl: Callable[..., int] = libc.prctl
    return prctl


_PRCTL = _prctl()  # looked up before any fork: the child between fork and exec must not load libraries


def child_setup(parent_pid: int, nice: int = NICE) -> Callable[[], None]:
    """What a child runs between fork and exec: a lower CPU priority (`nice`), SIGKILL when its parent dies.

    PR_SET_PDEATHSIG survives exec; checking the parent pid after setting it closes the race with a parent
    that died before the call (the child has already been handed to another process then).
    """

    def setup() -> None:
        os.nice(nice)
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent_pid:
                os.kill(os.getpid(), signal.SIGKILL)

    return setup


def start_child(args: list[str], nice: int, log: Path | None = None) -> subprocess.Popen[bytes]:
    """`turnlens <args>` in a child of this process at CPU priority `nice`, killed if this process dies; its
    standard output appended to `log`, or discarded."""
    out = open(log, "ab") if log is not None else None  # noqa: SIM115 - the child holds it; ours closes below
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "turnlens.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=out if out is not None else subprocess.DEVNULL,
            env={**os.environ, PARENT_PID_ENV: str(os.getpid())},
            preexec_fn=child_setup(os.getpid(), nice),  # noqa: PLW1509 - no threads run in the child before exec
        )
    finally:
        if out is not None:
            out.close()


def run_child(args: list[str], nice: int, timeout_s: float, log: Path | None = None) -> int | None:
    """`turnlens <args>` once, as start_child starts it: its exit code, or None if stopped at `timeout_s`."""
    child = start_child(args, nice, log)
    try:
        return child.wait(timeout_s)
    except subprocess.TimeoutExpired:
        child.terminate()
        try:
            child.wait(5.0)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        return None


class ChildLoop:
    """Runs `turnlens <args>` every `interval_s` seconds until stopped, at CPU priority `nice`."""

    def __init__(
        self, name: str, args: list[str], interval_s: float, nice: int = NICE, log: Path | None = None
    ) -> None:
        self.name = name
        self.args = args
        self.interval_s = interval_s
        self.nice = nice
        self.log = log  # where the child's standard output goes (appended); None: nowhere
        self.runs = 0
        self.failures = 0
        self._stopping = threading.Event()
        self._child: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopping.wait(self.interval_s):
            self._child = start_child(self.args, self.nice, self.log)
            code = self._child.wait()
            self.runs += 1
            if code not in (0, BUSY) and not self._stopping.is_set():
                self.failures += 1
                print(
                    f"turnlens collect: {self.name} exited {code}; the next run retries",
                    file=sys.stderr,
                    flush=True,
                )
            self._child = None

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stops the loop; a child still running is terminated (what it was writing is swept later)."""
        self._stopping.set()
        child = self._child
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout_s)
            except subprocess.TimeoutExpired:
                child.kill()
        self._thread.join(timeout_s)


def sweep_replaced(store: Path, stop: threading.Event, every_s: float = SWEEP_EVERY_S) -> None:
    """Deletes the store's replaced files that are due, in the first pause of its readers, until `stop`."""
    wait_s = every_s
    while not stop.wait(wait_s):
        started = time.monotonic()
        try:
            compaction.sweep(store, lock_timeout_s=0.1)  # compaction or a materialiser may hold the lock
        except (compaction.CompactionBusy, FileNotFoundError):
            pass  # busy now, or the store not made yet: the next look
        # A look finds nothing due or a long reader inside at once; one that took longer closed the turnstile
        # and waited for short readers (or deleted): the next waits a while, so readers are seldom held.
        wait_s = every_s if time.monotonic() - started < every_s else SWEEP_BACKOFF_S


class ReplacedSweeper:
    """sweep_replaced in a thread of the collector, with ChildLoop's start and stop."""

    def __init__(self, store: Path) -> None:
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=sweep_replaced, args=(store, self._stopping), name="sweep", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stopping.set()
        self._thread.join(timeout_s)
