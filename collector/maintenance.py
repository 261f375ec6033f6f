"""The collector's maintenance in child processes: `turnlens compact` and `turnlens materialize` on timers.

Children, not threads: compaction holds a batch of segments in memory to sort it, and a snapshot's DuckDB work
takes gigabytes and a core for seconds; the collector's own memory and its answers to exporters must depend on
neither. The children run at a lower CPU priority; a run still going when the next is due is not doubled, and
a child that finds another process maintaining the store (exit 75) waits for the next interval.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

NICE = 10
BUSY = 75  # EX_TEMPFAIL: another process holds the store's maintenance or snapshot lock


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
        while not self._stopping.wait(self.interval_s):
            self._child = subprocess.Popen(
                [sys.executable, "-m", "turnlens.cli", *self.args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                preexec_fn=lambda: os.nice(NICE),  # noqa: PLW1509 - no threads run in the child before exec
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
