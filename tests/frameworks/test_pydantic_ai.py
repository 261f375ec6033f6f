"""pydantic-ai (`Agent.instrument_all`): its GenAI spans read as the user meant the turns."""

from __future__ import annotations

from collections.abc import Callable

import expectations
import pytest
from framework_runs import FrameworkRun


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
    say whether it went out, so the ledger says interrupted, never failed (nothing happened) nor committed."""
    run = framework_store("run_pydantic_ai_stop_tool.py")
    assert "e-mail sent" in run.output  # what happened in the world
    assert run.query("select status, cancel_origin from turns") == [("cancelled", "inferred.exception")]
    assert run.query("select tool_name, status, tool_cancelled, commit_inferred from side_effects") == [
        ("send_email", "interrupted", True, False)
    ]
