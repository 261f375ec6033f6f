"""Logfire's SDK (pydantic-ai instrumented through it) exporting to turnlens; the session as baggage.

The cancelled turn is also opened on the dashboard's Turn detail page in Chromium (screenshot in
test-output/frameworks/): its names are rendered text, and no exception is a step of its timeline."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import expectations
import pytest
import turn_page
from framework_runs import FrameworkRun


@pytest.mark.slow
@pytest.mark.browser
def test_logfire_turns_read_as_meant(
    framework_store: Callable[[str], FrameworkRun], output_dir: Path
) -> None:
    run = framework_store("run_logfire.py")
    # Logfire records the CancelledError on the turn's span: the first signal is the stream cut short under it
    assert expectations.assert_reads_as_meant(run).startswith("inferred.")
    # names are what Logfire rendered, never its templates
    assert run.query("select count(*) from turn_timeline where name like '%{%}%'") == [(0,)]
    assert run.query("select count(*) from turn_timeline where name = 'exception'") == [(0,)]

    # the cancelled turn on the Turn detail page: rendered names and steps, no template, no exception step
    ((session, turn),) = run.query("select session_id, turn_id from turns where status = 'cancelled'")
    steps = run.query(
        "select name, step from turn_timeline where turn_id = ? order by seq".replace("?", f"'{turn}'")
    )
    assert ("cancel.requested", "cancel.requested") in steps and ("invoke_agent assistant", None) in steps
    run.close()  # the dashboard opens the store's catalog itself
    text = turn_page.screenshot_turn(run.store, session, turn, output_dir / "frameworks" / "logfire_turn.png")
    assert "Turn detail" in text
    assert "{prompt}" not in text and "Traceback" not in text


@pytest.mark.slow
@pytest.mark.browser
def test_a_tool_running_when_the_user_stops_is_interrupted_and_a_finding(
    framework_store: Callable[[str], FrameworkRun], output_dir: Path
) -> None:
    """Logfire's pydantic-ai spans, stopped while send_email runs in its thread (which sends the e-mail after
    the stop): the tool span ends with the CancelledError, the call is interrupted, and a finding asks whether
    the e-mail went out; the turn's page says so beside what committed despite the stop, and the Side effects
    page counts the call cut short."""
    run = framework_store("run_logfire_stop_tool.py")
    assert "e-mail sent" in run.output  # what happened in the world
    assert run.query("select status, cancel_origin from turns") == [("cancelled", "inferred.exception")]
    ledger = run.query("select tool_name, status, tool_cancelled, commit_inferred from side_effects")
    assert ledger == [("send_email", "interrupted", True, False)]
    assert run.query("select kind, severity from divergences") == [("interrupted_side_effect", "high")]
    [(session, turn)] = run.query("select session_id, turn_id from turns")
    shots = output_dir / "frameworks"
    run.close()  # the dashboard opens the store's catalog itself
    turn_text, ledger_text = turn_page.screenshot_pages(
        run.store,
        [
            (turn_page.turn_path(session, turn), shots / "logfire_stop_tool.png", ["interrupted_side"]),
            ("side_effects", shots / "logfire_stop_tool_ledger.png", ["Cut short"]),
        ],
    )
    assert "1 cut short, outcome unknown" in turn_text
    tiles = ledger_text.split("Cut short", 1)[1].split()
    assert tiles[0] == "1", ledger_text  # the tile's count, drawn under its label
