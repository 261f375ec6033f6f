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
def test_a_run_interrupted_during_a_tool_reads_as_stopped_or_paused(
    framework_store: Callable[[str], FrameworkRun],
) -> None:
    """session-stop: the stop cancels the task awaiting send_email, whose thread sends the e-mail anyway. The
    SDK ends every span with an ok status and no exception; what shows the stop is the tool span, which kept
    the call's input but never got its result, with no model call after it: the turn is cancelled, the call
    interrupted. session-coroutine: the stop cancels the coroutine tool itself, while it waits for the relay's
    answer; its span reads the same. session-approval: the SDK pauses the run for the tool's approval, and its
    tool span has no result either, but ends at once: no stop, a call awaiting approval; the resumed run
    commits it."""
    run = framework_store("run_openai_agents_interruptions.py")
    assert "e-mail sent" in run.output and "resumed: Sent." in run.output  # what happened in the world
    assert "e-mail handed to the relay" in run.output
    turns = run.query("select session_id, status, cancel_origin from turns order by started_wall_ns")
    assert turns == [
        ("session-stop", "cancelled", "inferred.tool_without_result"),
        ("session-coroutine", "cancelled", "inferred.tool_without_result"),
        ("session-approval", "completed", None),  # the paused run
        ("session-approval", "completed", None),  # the resumed one, in a trace of its own
    ]
    ledger = """
        select session_id, tool_name, status, tool_cancelled, approval_requested_hlc is not null
        from side_effects order by session_id, started_ns"""
    assert run.query(ledger) == [
        ("session-approval", "send_email", "awaiting_approval", False, True),
        ("session-approval", "send_email", "committed", False, False),
        ("session-coroutine", "send_email", "interrupted", True, False),
        ("session-stop", "send_email", "interrupted", True, False),
    ]
    stopped = """
        select session_id, kind from divergences where kind = 'interrupted_side_effect' order by session_id"""
    assert run.query(stopped) == [  # the paused call is none
        ("session-coroutine", "interrupted_side_effect"), ("session-stop", "interrupted_side_effect")
    ]
