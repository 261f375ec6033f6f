"""Framework tests: a real framework in its own process, a mock OpenAI server and a real `turnlens collect`.

`framework_store("run_x.py")` starts the mock model server and a collector, runs the scenario program against
both (it exports over OTLP/HTTP), stops the collector so every span is flushed, and returns the store.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import otlp_samples
import pytest
from framework_runs import HERE, REGISTRY, FrameworkRun
from mock_openai import MockOpenAI


@pytest.fixture
def framework_store(tmp_path: Path) -> Iterator[Callable[[str], FrameworkRun]]:
    collectors: list[otlp_samples.CollectorProcess] = []

    def run(script: str) -> FrameworkRun:
        store = tmp_path / "store"
        store.mkdir()
        (store / "tool_registry.toml").write_text(REGISTRY)
        collector = otlp_samples.CollectorProcess(store).start()
        collectors.append(collector)
        with MockOpenAI() as mock:
            done = subprocess.run(
                [
                    sys.executable,
                    str(HERE / script),
                    "--otlp",
                    f"http://{collector.http}",
                    "--openai",
                    mock.base_url,
                ],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=HERE,
            )
        assert done.returncode == 0, done.stdout + done.stderr
        assert collector.stop() == 0, "\n".join(collector.lines)
        return FrameworkRun(store, mock, done.stdout + done.stderr)

    yield run
    for collector in collectors:
        if collector.proc and collector.proc.poll() is None:
            collector.kill()
