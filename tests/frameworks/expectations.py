"""What a user expects to read after the two sessions of scenario_harness, whatever the framework."""

from __future__ import annotations

from framework_runs import FrameworkRun

EXPECTED_TURNS = [
    ("session-one", "completed"),  # the greeting
    ("session-one", "completed"),  # the weather lookup
    ("session-one", "cancelled"),  # the long answer the user stopped
    ("session-two", "completed"),  # the e-mail
]


def assert_turns_and_sessions(run: FrameworkRun) -> None:
    """One turn per user message, in the sessions the user ran them in, the stopped one cancelled."""
    assert run.turns() == EXPECTED_TURNS


def assert_cancel_inferred(run: FrameworkRun) -> str:
    """The cancelled turn has a cancel row saying how it was inferred; returns that origin."""
    rows = run.query(
        "select x.origin from cancel_acks as x join turns as t using (session_id, turn_id) "
        "where t.status = 'cancelled'"
    )
    assert len(rows) == 1, rows
    origin = rows[0][0]
    assert origin.startswith("inferred."), origin
    return str(origin)


def assert_usage_known(run: FrameworkRun) -> None:
    """Every completed turn's token usage is known, from the tokens its model calls reported."""
    rows = run.query(
        "select t.status, u.usage, u.input_tokens, u.output_tokens from turn_usage as u "
        "join turns as t using (session_id, turn_id) order by t.started_wall_ns"
    )
    completed = [r for r in rows if r[0] == "completed"]
    assert len(completed) == 3, rows
    for _, usage, input_tokens, output_tokens in completed:
        assert usage == "known" and input_tokens > 0 and output_tokens > 0, rows


def assert_tool_calls_under_model_ids(run: FrameworkRun) -> None:
    """Each tool run is in the ledger under the call id the model requested; the e-mail commit inferred."""
    rows = run.query(
        "select tool_name, tool_call_id, status, commit_inferred from side_effects "
        "where tool_name in ('get_weather', 'send_email') order by tool_name"
    )
    assert rows == [
        ("get_weather", "call_weather_1", "succeeded", False),
        ("send_email", "call_email_1", "committed", True),
    ]


def assert_only_real_findings(run: FrameworkRun) -> None:
    """The one real problem: send_email (soft_irreversible) committed without an idempotency key."""
    rows = run.query("select kind, evidence from divergences")
    assert [kind for kind, _ in rows] == ["missing_idempotency_key"], rows
    assert "send_email" in rows[0][1]


def assert_reads_as_meant(run: FrameworkRun) -> str:
    """Every expectation above; returns the inferred cancel's origin for the framework's own assertion."""
    assert_turns_and_sessions(run)
    origin = assert_cancel_inferred(run)
    assert_usage_known(run)
    assert_tool_calls_under_model_ids(run)
    assert_only_real_findings(run)
    return origin
