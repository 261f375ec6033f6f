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


@pytest.mark.slow
def test_a_tool_running_when_the_user_stops_is_interrupted_and_the_turn_cancelled(
    framework_store: Callable[[str], FrameworkRun],
) -> None:
    """The stop cancels the task awaiting send_email, whose thread sends the e-mail anyway. The SDK ends every
    span with an ok status and no exception; what shows the stop is the tool span, which kept the call's input
    but never got its result, with no model call after it: the turn is cancelled, the call interrupted."""
    run = framework_store("run_openai_agents_stop_tool.py")
    assert "e-mail sent" in run.output  # what happened in the world
    turn = run.query("select status, cancel_origin from turns")
    assert turn == [("cancelled", "inferred.tool_without_result")]
    assert run.query("select tool_name, status, tool_cancelled, commit_inferred from side_effects") == [
        ("send_email", "interrupted", True, False)
    ]
