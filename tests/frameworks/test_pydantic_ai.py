"""pydantic-ai (`Agent.instrument_all`): its GenAI spans read as the user meant the turns."""

from __future__ import annotations

from collections.abc import Callable

import expectations
import pytest
from framework_runs import REGISTRY, FrameworkRun


@pytest.mark.slow
def test_pydantic_ai_turns_read_as_meant(framework_store: Callable[[str], FrameworkRun]) -> None:
    run = framework_store("run_pydantic_ai.py")
    # the stopped stream's chat span ended without a finish reason: no exception reaches the span
    assert expectations.assert_reads_as_meant(run) == "inferred.no_finish_reason"
    # cancel-to-ack is unknown: nothing in pydantic-ai's spans says when the cancel was acknowledged
    assert run.query("select cancel_to_ack_ms from cancel_acks") == [(None,)]


@pytest.mark.slow
def test_a_tool_running_when_the_user_stops_is_interrupted_not_failed(
    framework_store: Callable[[str], FrameworkRun],
) -> None:
    """The stop cancels the task awaiting send_email, whose thread sends the e-mail anyway: the spans cannot
    say whether it went out, so the ledger says interrupted, never failed (nothing happened) nor committed,
    and a finding asks the question."""
    run = framework_store("run_pydantic_ai_stop_tool.py")
    assert "e-mail sent" in run.output  # what happened in the world
    assert run.query("select status, cancel_origin from turns") == [("cancelled", "inferred.exception")]
    assert run.query("select tool_name, status, tool_cancelled, commit_inferred from side_effects") == [
        ("send_email", "interrupted", True, False)
    ]
    # the question the spans leave open, put to a person: did the e-mail go out?
    assert run.query("select kind, severity from divergences") == [("interrupted_side_effect", "high")]


@pytest.mark.slow
def test_an_approval_the_application_records_is_read_and_one_it_does_not_is_a_finding(
    framework_store: Callable[[str], FrameworkRun],
) -> None:
    """send_email requires approval: the run asking for it ends (the call awaits approval), a second executes
    the approved call. The application that emits approval.granted naming the call, on its span around that
    second run, has no finding; the one that approves without saying so has an unapproved_side_effect."""
    registry = REGISTRY + "requires_approval = true\n"  # send_email's entry comes last
    run = framework_store("run_pydantic_ai_approval.py", registry=registry)
    assert run.output.count("e-mail sent") == 2
    assert run.query("select session_id, status from turns order by started_wall_ns") == [
        ("session-recorded", "completed"), ("session-recorded", "completed"),
        ("session-unrecorded", "completed"), ("session-unrecorded", "completed"),
    ]
    ledger = """
        select session_id, tool_call_id, status, requires_approval, approval_granted_hlc < committed_hlc
        from side_effects order by session_id, started_ns"""
    assert run.query(ledger) == [
        # the run asking for approval ends with the call listed in its final_result: it awaits approval
        ("session-recorded", "call_email_1", "awaiting_approval", True, None),
        ("session-recorded", "call_email_1", "committed", True, True),
        ("session-unrecorded", "call_email_1", "awaiting_approval", True, None),
        ("session-unrecorded", "call_email_1", "committed", True, None),
    ]
    assert run.query("select session_id, kind from divergences where kind like 'unapproved%'") == [
        ("session-unrecorded", "unapproved_side_effect")
    ]
