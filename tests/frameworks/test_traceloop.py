"""Traceloop / OpenLLMetry: its workflow, tool and OpenAI spans, the session as an association property."""

from __future__ import annotations

from collections.abc import Callable

import expectations
import pytest
from framework_runs import FrameworkRun


@pytest.mark.slow
def test_traceloop_turns_read_as_meant(framework_store: Callable[[str], FrameworkRun]) -> None:
    run = framework_store("run_traceloop.py")
    # the stopped stream's chat span ended "ok" with an empty finish reason
    assert expectations.assert_reads_as_meant(run) == "inferred.no_finish_reason"
    # Traceloop's tool spans (traceloop.span.kind = tool, no gen_ai.operation.name) are the tool layer
    assert run.query("select distinct layer from spans where name like '%.tool'") == [("tool",)]
    # its stream chunk events are no steps on the timeline
    assert run.query("select count(*) from turn_timeline where name like '%chunk%'") == [(0,)]


@pytest.mark.slow
def test_a_tool_the_user_stopped_reads_as_stopped_and_its_side_effect_as_unknown(
    framework_store: Callable[[str], FrameworkRun],
) -> None:
    """The user stops while send_email (a coroutine @tool) waits for the relay's answer, the e-mail already
    handed over. Traceloop ends the spans with their status unset and no exception; the tool span kept its
    input (traceloop.entity.input) but never got its output, and no model call came after it. Read before as
    a completed turn and a committed call; it is a cancelled turn, an interrupted call, and a finding."""
    run = framework_store("run_traceloop_stop_tool.py")
    assert run.output.index("e-mail handed to the relay") < run.output.index("stop")  # the world, as it went
    turns = run.query("select status, cancel_origin from turns")
    assert turns == [("cancelled", "inferred.tool_without_result")]
    ledger = run.query("select tool_call_id, status, tool_cancelled, commit_inferred from side_effects")
    assert ledger == [("call_email_1", "interrupted", True, False)]
    assert run.query("select kind from divergences") == [("interrupted_side_effect",)]
