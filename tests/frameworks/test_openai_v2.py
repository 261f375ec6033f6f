"""The OpenAI SDK with opentelemetry-instrumentation-openai-v2: GenAI chat spans under the application's own
`invoke_agent` and `execute_tool` spans."""

from __future__ import annotations

from collections.abc import Callable

import expectations
import pytest
from framework_runs import FrameworkRun


@pytest.mark.slow
def test_openai_sdk_turns_read_as_meant(framework_store: Callable[[str], FrameworkRun]) -> None:
    run = framework_store("run_openai_v2.py")
    # the stopped stream's chat span never ended, so the SDK never exported it: the run ended empty
    assert expectations.assert_reads_as_meant(run) == "inferred.span_never_ended"
