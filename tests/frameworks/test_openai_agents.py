"""The OpenAI Agents SDK traced by openinference-instrumentation-openai-agents: one trace per conversation."""

from __future__ import annotations

from collections.abc import Callable

import expectations
import pytest
from framework_runs import FrameworkRun


@pytest.mark.slow
def test_openai_agents_turns_read_as_meant(framework_store: Callable[[str], FrameworkRun]) -> None:
    run = framework_store("run_openai_agents.py")
    # `with trace(...)` around the three runs of session one: three turns in one trace, not one turn
    assert expectations.assert_reads_as_meant(run) == "inferred.no_finish_reason"
    assert run.query(
        "select count(distinct turn_id), count(distinct trace_id) from spans where session_id = 'session-one'"
    ) == [(3, 1)]
