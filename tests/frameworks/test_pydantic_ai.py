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
