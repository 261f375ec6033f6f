"""A real `turnlens dashboard` on a free port of 127.0.0.1 and Debian's headless Chromium to look at it: what
every browser test (tests/dashboard, tests/frameworks) starts the same way."""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NO_CHROMIUM = "Debian's chromium is not installed: `make browser` installs it (make test does)"


class DashboardDidNotStart(AssertionError):
    """The server exited or never answered its health check; the message holds its log."""


def die_with_parent() -> None:
    """The server gets SIGTERM if pytest itself is killed (a timeout), instead of outliving it."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_dashboard(store: Path, log_path: Path, *, timeout_s: float = 60) -> Iterator[str]:
    """`turnlens dashboard --store STORE` until the block ends; yields its URL once it answers its health
    check. Its output goes to `log_path`, shown in the error when it does not come up within `timeout_s`."""
    turnlens = Path(sys.executable).with_name("turnlens")
    port = free_port()
    with open(log_path, "w+") as log:
        process = subprocess.Popen(
            [str(turnlens), "dashboard", "--store", str(store), "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
                        if response.read() == b"ok":
                            break
                except OSError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise DashboardDidNotStart(f"turnlens dashboard did not come up:\n{log.read()}")
                time.sleep(0.3)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
