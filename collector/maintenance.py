"""The collector's maintenance in child processes: `turnlens compact` on a timer, and one long-lived
`turnlens materialize --every`.

Children, not threads: compaction holds a batch of segments in memory to sort it, and the derived state's
DuckDB work takes a core for a second at a time (and up to its memory limit in a full build); the collector's
own memory and its answers to exporters must depend on neither. The children run at a lower CPU priority; a
run still going when the next is due is not doubled, and a child that finds another process maintaining the
store (exit 75) waits for the next interval. The materialiser refreshes every second or so in one process
(starting an interpreter per refresh would cost as much as the refresh); when it exits it is started again
after the interval. A child ends with its collector (on Linux, the parent-death signal): a collector killed
with -9 and started again leaves no second materialiser refreshing the store.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

NICE = 10
BUSY = 75  # EX_TEMPFAIL: another process holds the store's maintenance or snapshot lock
_PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up before any fork (a child of a threaded process should not load libraries)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None  # not Linux: children outlive a collector killed with -9


def _child_setup(parent: int, prctl: Callable[..., int] | None) -> None:
    """In the child before exec: a lower priority, and SIGTERM when the collector's thread that started it
    ends (the collector stopped or died)."""
    os.nice(NICE)
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the collector died before the signal was asked for
            os._exit(1)


class ChildLoop:
    """Runs `turnlens <args>` every `interval_s` seconds until stopped."""

    def __init__(self, name: str, args: list[str], interval_s: float) -> None:
        self.name = name
        self.args = args
        self.interval_s = interval_s
        self.runs = 0
        self.failures = 0
        self._stopping = threading.Event()
        self._child: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        parent, prctl = os.getpid(), _prctl()
        while not self._stopping.wait(self.interval_s):
            self._child = subprocess.Popen(
                [sys.executable, "-m", "turnlens.cli", *self.args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                # no threads run in the child before exec
                preexec_fn=lambda: _child_setup(parent, prctl),  # noqa: PLW1509
            )
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
