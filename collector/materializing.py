"""The collector's snapshot loop: every interval it runs `turnlens materialize` on its store in a child.

A child process, not a thread: the DuckDB work of a snapshot takes gigabytes and a core for seconds, and
the collector's own memory and its answers to exporters must not depend on it. The child runs at a lower CPU
priority with one DuckDB thread; a run still going when the next is due is not doubled, and another
collector's materialiser on the same store makes ours skip (the snapshot lock, exit 75).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

NICE = 10


class MaterializeLoop:
    """Starts `turnlens materialize --store DIR` every `interval_s` seconds until stopped."""

    def __init__(self, store: Path, interval_s: float, *, margin_s: float = 10.0, threads: int = 1) -> None:
        self.store = store
        self.margin_s = margin_s
        self.interval_s = interval_s
        self.threads = threads
        self.runs = 0
        self.failures = 0
        self._stopping = threading.Event()
        self._child: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._loop, name="materialize", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "turnlens.cli",
            "materialize",
            "--store",
            str(self.store),
            "--quiet",
            "--threads",
            str(self.threads),
            "--margin",
            str(self.margin_s),
        ]

    def _loop(self) -> None:
        while not self._stopping.wait(self.interval_s):
            self._child = subprocess.Popen(
                self._command(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                preexec_fn=lambda: os.nice(NICE),  # noqa: PLW1509 - no threads run in the child before exec
            )
            code = self._child.wait()
            self.runs += 1
            if code not in (0, 75):  # 75: another collector's materialiser holds the store
                self.failures += 1
                print(
                    f"turnlens collect: materialize exited {code}; the views keep the previous snapshot",
                    file=sys.stderr,
                    flush=True,
                )
            self._child = None

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stops the loop; a snapshot being written is abandoned (its temporary folder is swept later)."""
        self._stopping.set()
        child = self._child
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout_s)
            except subprocess.TimeoutExpired:
                child.kill()
        self._thread.join(timeout_s)
