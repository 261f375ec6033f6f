"""Framework tests: a real framework in its own process, a mock OpenAI server and a real `turnlens collect`.

`framework_store("run_x.py")` starts the mock model server and a collector, runs the scenario program against
both (it exports over OTLP/HTTP; in this environment, or in another's `python=`), stops the collector so
every span is flushed and the per-turn views cover them, and returns the store.
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
    runs: list[FrameworkRun] = []

    def run(script: str, python: Path = Path(sys.executable), registry: str = REGISTRY) -> FrameworkRun:
        store = tmp_path / "store"
        store.mkdir()
        (store / "tool_registry.toml").write_text(registry)
        # the refresh at stop brings the per-turn views up to the last span; it has the shutdown grace, which
        # a loaded machine may need more of than the default
        collector = otlp_samples.CollectorProcess(store, "--shutdown-grace", "120s")
        collectors.append(collector)
        with MockOpenAI() as mock:
            # the program imports its framework while the collector starts (it waits for the port to open)
            program = subprocess.Popen(
                [
                    str(python),
                    str(HERE / script),
                    "--otlp",
                    f"http://{collector.http}",
                    "--openai",
                    mock.base_url,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=HERE,
            )
            collector.start()
            output, _ = program.communicate(timeout=180)
        assert program.returncode == 0, output
        assert collector.stop(timeout_s=150) == 0, "\n".join(collector.lines)
        assert "per-turn views cover every span stored" in collector.lines[-1], collector.lines[-1]
        runs.append(FrameworkRun(store, mock, output))
        return runs[-1]

    yield run
    for finished in runs:
        finished.close()
    for collector in collectors:
        if collector.proc and collector.proc.poll() is None:
            collector.kill()
