"""Collector test fixtures: the OTLP sample requests (otlp_samples.py) and real collector processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import otlp_samples
import pytest


@pytest.fixture
def start_collector(tmp_path: Path) -> Iterator[Callable[..., otlp_samples.CollectorProcess]]:
    """Starts `turnlens collect` processes on free ports; whatever is still running is stopped after."""
    started: list[otlp_samples.CollectorProcess] = []

    def start(*args: str, store: Path | None = None) -> otlp_samples.CollectorProcess:
        process = otlp_samples.CollectorProcess(store or tmp_path / "store", *args).start()
        started.append(process)
        return process

    yield start
    for process in started:
        if process.proc and process.proc.poll() is None:
            process.kill()
