"""LangGraph's ReAct agent traced by openinference-instrumentation-langchain, and by LangSmith's own
OpenTelemetry export (`LANGSMITH_OTEL_ENABLED`): the same scenarios read the same either way."""

from __future__ import annotations

from collections.abc import Callable

import expectations
import pytest
from framework_runs import FrameworkRun

TRACED = pytest.mark.parametrize(
    "tracing",
    ["langgraph", "langsmith", "traceloop_langgraph"],
    ids=["openinference", "langsmith", "traceloop"],
)


@pytest.mark.slow
@TRACED
def test_langgraph_turns_read_as_meant(framework_store: Callable[[str], FrameworkRun], tracing: str) -> None:
    run = framework_store(f"run_{tracing}.py")
    # the graph's spans end with the CancelledError: cancelled, not failed, with a cancel-to-ack figure from
    # the first span the cancellation reached to the last one it stopped
    assert expectations.assert_reads_as_meant(run) == "inferred.exception"
    ((ack_ms, layers),) = run.query("select cancel_to_ack_ms, layers_acked from cancel_acks")
    assert ack_ms is not None and 0 <= ack_ms < 1000 and layers == ["runtime"]
    # the exception events are no steps on the turn's timeline
    assert run.query("select count(*) from turn_timeline where name = 'exception'") == [(0,)]


@pytest.mark.slow
@pytest.mark.parametrize("tracing", ["langgraph", "langsmith"], ids=["openinference", "langsmith"])
def test_a_tool_asking_a_person_with_interrupt_awaits_approval_and_commits_once_resumed(
    framework_store: Callable[[str], FrameworkRun], tracing: str
) -> None:
    """send_email drafts for 50 ms, then calls interrupt() to ask whether to send: the run pauses, its tool
    span ends without result and with LangGraph's GraphInterrupt. That is a pause, not a stop, whatever the
    span's length: the call awaits approval. The resumed run (another trace) sends the e-mail."""
    run = framework_store(f"run_{tracing}_interrupt.py")
    assert "e-mail sent" in run.output and "resumed: Sent." in run.output
    assert run.query("select status, cancel_origin from turns order by started_wall_ns") == [
        ("completed", None), ("completed", None)
    ]
    ledger = """
        select tool_name, status, approval_requested_hlc is not null from side_effects order by started_ns"""
    assert run.query(ledger) == [
        ("send_email", "awaiting_approval", True),
        ("send_email", "committed", False),
    ]


@pytest.mark.slow
@TRACED
def test_a_tool_running_when_the_user_stops_commits_after_it_from_a_thread_or_is_interrupted_on_the_loop(
    framework_store: Callable[[str], FrameworkRun], tracing: str
) -> None:
    """session-thread: the stop cancels the graph's task, not the worker thread running send_email: the
    graph's spans end with the CancelledError. OpenInference and LangSmith end the tool's span a second later,
    with an ok status, when the thread returns having sent the e-mail: the spans tell the truth, a side effect
    committed after the user's stop. Traceloop ends it at the stop, with the CancelledError, as if the call
    had been cut short: the spans cannot tell the thread went on, so the call is interrupted and its outcome a
    question. session-coroutine: the stop cancels the tool itself, waiting for the relay's answer with the
    e-mail handed over: its span ends with the CancelledError, the call interrupted, and a finding asks
    whether the e-mail went out."""
    run = framework_store(f"run_{tracing}_stop_tool.py")
    assert "e-mail sent" in run.output and "e-mail handed to the relay" in run.output  # the world, as it went
    turns = run.query("select session_id, status, cancel_origin from turns order by session_id")
    assert turns == [
        ("session-coroutine", "cancelled", "inferred.exception"),
        ("session-thread", "cancelled", "inferred.exception"),
    ]
    [(status, cancelled, after_ms)] = run.query("""
        select s.status, s.tool_cancelled, (s.committed_hlc >> 16) - (x.requested_hlc >> 16)
        from side_effects as s join cancel_acks as x using (session_id, turn_id)
        where session_id = 'session-thread'""")
    found = run.query("select session_id, kind from divergences where kind <> 'missing_idempotency_key'")
    if tracing == "traceloop_langgraph":  # the tool's span ends at the stop: the thread's commit is unseen
        assert (status, cancelled, after_ms) == ("interrupted", True, None)
        assert sorted(found) == [
            ("session-coroutine", "interrupted_side_effect"),
            ("session-thread", "interrupted_side_effect"),
        ]
    else:
        assert (status, cancelled) == ("committed", False) and 500 < after_ms < 5000  # the tool sleeps 2 s
        assert sorted(found) == [
            ("session-coroutine", "interrupted_side_effect"),
            ("session-thread", "cancelled_but_committed"),
        ]
    ledger = "select status, tool_cancelled from side_effects where session_id = 'session-coroutine'"
    assert run.query(ledger) == [("interrupted", True)]
