"""`turnlens demo` (`make demo`): sample in, live traffic arriving, dashboard serving, clean stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from turnlens.queries import catalog

pytestmark = pytest.mark.slow


def _span_count(store: Path) -> int:
    con = catalog.connect(store)
    try:
        return int(con.execute("select count(*) from spans").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def _wait(predicate, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except Exception:  # not up yet
            pass
        time.sleep(0.5)
    return False


def test_demo_loads_the_sample_streams_live_traffic_and_serves_the_dashboard(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    store = tmp_path / "store"
    http, grpc, ui = free_port(), free_port(), free_port()
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "turnlens.cli",
            "demo",
            "--store",
            str(store),
            "--http",
            f"127.0.0.1:{http}",
            "--grpc",
            f"127.0.0.1:{grpc}",
            "--port",
            str(ui),
            "--rate",
            "5",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        page = f"http://127.0.0.1:{ui}/"
        assert _wait(lambda: urllib.request.urlopen(page, timeout=2).status == 200, 90), (
            "dashboard never answered"
        )
        sample_spans = _span_count(store)
        assert sample_spans >= 2000, "the recorded sample was not loaded"
        assert _wait(lambda: _span_count(store) > sample_spans, 90), "no live traffic reached the store"
    finally:
        demo.send_signal(signal.SIGTERM)
        try:
            assert demo.wait(timeout=30) == 0
        finally:
            if demo.poll() is None:
                os.killpg(demo.pid, signal.SIGKILL)
    assert _wait(lambda: _span_count(store) > sample_spans, 1)

