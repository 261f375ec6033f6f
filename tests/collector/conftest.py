"""Collector test fixtures: the OTLP sample requests (otlp_samples.py) and real collector processes."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


def _load(name: str) -> object:
    """Imports a helper module of this folder by path and registers it, so tests can `import` it."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _HERE / f"{name}.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_load("otlp_samples")
import otlp_samples  # noqa: E402 - registered by _load just above


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
