"""LangGraph's ReAct agent traced by openinference-instrumentation-langchain."""

from __future__ import annotations

from collections.abc import Callable

import expectations
import pytest
from framework_runs import FrameworkRun


@pytest.mark.slow
def test_langgraph_turns_read_as_meant(framework_store: Callable[[str], FrameworkRun]) -> None:
    run = framework_store("run_langgraph.py")
    # the graph's spans end with the CancelledError: cancelled, not failed, with a cancel-to-ack figure from
    # the first span the cancellation reached to the last one it stopped
    assert expectations.assert_reads_as_meant(run) == "inferred.exception"
    ((ack_ms, layers),) = run.query("select cancel_to_ack_ms, layers_acked from cancel_acks")
    assert ack_ms is not None and 0 <= ack_ms < 1000 and layers == ["runtime"]
    # the exception events are no steps on the turn's timeline
    assert run.query("select count(*) from turn_timeline where name = 'exception'") == [(0,)]
