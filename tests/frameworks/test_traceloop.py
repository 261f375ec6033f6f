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
