"""Google ADK (`google-adk`): its own GenAI spans read as the user meant the turns.

The scenario runs in ADK's environment (`make adk` builds .venv-adk; ADK pins an older OpenTelemetry than the
project's), as an application would run its agents in a process of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import expectations
import pytest
from framework_runs import FrameworkRun

ADK_PYTHON = Path(__file__).resolve().parents[2] / ".venv-adk" / "bin" / "python"


@pytest.mark.slow
def test_adk_turns_read_as_meant(framework_store: Callable[..., FrameworkRun]) -> None:
    assert ADK_PYTHON.exists(), "ADK's environment is missing: `make adk` builds it (`make test` does)"
    run = framework_store("run_adk.py", python=ADK_PYTHON)
    # the stopped stream's model call ended without a finish reason; ADK's model calls, which carry the
    # invocation's id, are not agent runs of their own (each turn would read as cancelled)
    assert expectations.assert_reads_as_meant(run) == "inferred.no_finish_reason"
    # each invocation is a trace of its own under ADK's workflow span, an agent runtime span like its agent's
    assert run.query(
        "select count(distinct trace_id), count(*) filter (where layer is null) from spans"
    ) == [(4, 0)]
    assert run.query(
        "select distinct layer from spans where name like 'invoke_workflow %'"
    ) == [("runtime",)]


@pytest.mark.slow
def test_adk_parallel_calls_and_a_handoff_are_no_tools_of_their_own(
    framework_store: Callable[..., FrameworkRun],
) -> None:
    """ADK's span around a batch of parallel calls names the tool '(merged tools)': no call, so no row of the
    ledger. Its handoff to another agent is the tool `transfer_to_agent`: a call, but no untiered tool."""
    assert ADK_PYTHON.exists(), "ADK's environment is missing: `make adk` builds it (`make test` does)"
    run = framework_store("run_adk_more.py", python=ADK_PYTHON)
    assert run.query("select count(*) from spans where name = 'execute_tool (merged)'") == [(1,)]
    assert run.query("select count(*) from spans where name = 'execute_tool transfer_to_agent'") == [(1,)]
    assert run.query("select count(*) from spans where name = 'invoke_agent mailer'") == [(1,)]
    assert run.turns() == [("session-parallel", "completed"), ("session-handoff", "completed")]
    assert run.query(
        "select session_id, tool_name, tool_call_id, status from side_effects order by all"
    ) == [
        ("session-handoff", "transfer_to_agent", "call_transfer_1", "succeeded"),
        ("session-parallel", "get_weather", "call_weather_1", "succeeded"),
        ("session-parallel", "send_email", "call_email_1", "committed"),
    ]
    found = run.query("select session_id, kind from divergences")
    assert found == [("session-parallel", "missing_idempotency_key")]


@pytest.mark.slow
def test_a_tool_the_user_stopped_reads_as_stopped_and_its_side_effect_as_unknown(
    framework_store: Callable[..., FrameworkRun],
) -> None:
    """The user stops while send_email (a coroutine) waits for the relay's answer, the e-mail already handed
    over. ADK ends every span with its status unset and no exception; what shows the stop is the tool span,
    whose call id ADK leaves '<not specified>' because the tool gave no response, with no model call after
    it. Read before as a completed turn and a committed call; it is a cancelled turn, an interrupted call
    (named by its span, as the placeholder names no call) and a finding asking whether the e-mail went out."""
    assert ADK_PYTHON.exists(), "ADK's environment is missing: `make adk` builds it (`make test` does)"
    run = framework_store("run_adk_stop_tool.py", python=ADK_PYTHON)
    assert run.output.index("e-mail handed to the relay") < run.output.index("stop")  # the world, as it went
    [(tool_span_id, placeholder)] = run.query("""
        select span_id, attributes->>'$."gen_ai.tool.call.id"'
        from spans where name = 'execute_tool send_email'""")
    assert placeholder == "<not specified>"
    turns = run.query("select status, cancel_origin from turns")
    assert turns == [("cancelled", "inferred.tool_without_result")]
    assert run.query("select tool_call_id, status, tool_cancelled, commit_inferred from side_effects") == [
        (tool_span_id, "interrupted", True, False)
    ]
    found = run.query("select kind, tool_call_id from divergences")
    assert found == [("interrupted_side_effect", tool_span_id)]


@pytest.mark.slow
def test_a_call_asking_for_confirmation_awaits_it_and_commits_once_confirmed(
    framework_store: Callable[..., FrameworkRun],
) -> None:
    """send_email requires confirmation: ADK's first run opens the tool's span but answers the call with a
    request for confirmation (a millisecond, no model call after it); the application confirms, and the second
    run executes the call under the same id. Read before as two commits of one e-mail sent once."""
    assert ADK_PYTHON.exists(), "ADK's environment is missing: `make adk` builds it (`make test` does)"
    run = framework_store("run_adk_confirmation.py", python=ADK_PYTHON)
    assert run.output.count("e-mail sent") == 1
    assert run.output.index("asked") < run.output.index("e-mail sent") < run.output.index("confirmed")
    assert run.turns() == [("session-confirm", "completed"), ("session-confirm", "completed")]
    ledger = """
        select tool_call_id, status, approval_requested_hlc is not null
        from side_effects order by started_ns"""
    assert run.query(ledger) == [
        ("call_email_1", "awaiting_approval", True),
        ("call_email_1", "committed", False),
    ]
    inferred = """
        select attributes->>'$."turnlens.inferred"' from turn_events where step = 'approval.requested'"""
    assert run.query(inferred) == [("tool_confirmation",)]
