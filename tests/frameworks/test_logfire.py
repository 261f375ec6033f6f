"""Logfire's SDK (pydantic-ai instrumented through it) exporting to turnlens; the session as baggage."""

from __future__ import annotations

from collections.abc import Callable

import expectations
import pytest
from framework_runs import FrameworkRun


@pytest.mark.slow
def test_logfire_turns_read_as_meant(framework_store: Callable[[str], FrameworkRun]) -> None:
    run = framework_store("run_logfire.py")
    # Logfire records the CancelledError on the turn's span: the first signal is the stream cut short under it
    assert expectations.assert_reads_as_meant(run).startswith("inferred.")
    # names are what Logfire rendered, never its templates
    assert run.query("select count(*) from turn_timeline where name like '%{%}%'") == [(0,)]
    assert run.query("select count(*) from turn_timeline where name = 'exception'") == [(0,)]
