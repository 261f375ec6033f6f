"""The SQL console's guard on a real hardened connection to the store: what an analyst may and may not do."""

from __future__ import annotations

from pathlib import Path

import pytest
from turnlens.dashboard import console, data
from turnlens.queries import catalog


@pytest.fixture()
def cursor(store: Path):
    con = catalog.connect(store)
    data.harden(con, store)
    yield con.cursor()
    con.close()


def test_views_still_read_their_segments(cursor) -> None:
    result = console.run(cursor, "select count(*) as n from spans", row_limit=10, time_limit_s=10)
    assert result.frame["n"].iloc[0] > 0


def test_rows_are_cut_at_the_limit(cursor) -> None:
    result = console.run(cursor, "select * from range(50)", row_limit=10, time_limit_s=10)
    assert len(result.frame) == 10 and result.truncated


def test_a_slow_query_is_interrupted(cursor) -> None:
    with pytest.raises(console.ConsoleError, match="time limit"):
        console.run(cursor, "select count(*) from range(1000000000000)", row_limit=10, time_limit_s=0.5)


@pytest.mark.parametrize(
    "sql",
    [
        "copy (select 1) to '/tmp/turnlens-console-test.csv'",
        "create table t as select 1",
        "attach 'x.db'",
        "install httpfs",
        "set enable_external_access = true",
        "select 1; drop view spans",
    ],
)
def test_anything_but_a_query_is_refused(cursor, sql: str) -> None:
    with pytest.raises(console.ConsoleError):
        console.run(cursor, sql, row_limit=10, time_limit_s=5)
    assert not Path("/tmp/turnlens-console-test.csv").exists()


def test_files_outside_the_segments_stay_closed(cursor, store: Path) -> None:
    with pytest.raises(console.ConsoleError, match="disabled by configuration"):
        console.run(cursor, "select * from read_text('/etc/hostname')", row_limit=10, time_limit_s=5)
    with pytest.raises(console.ConsoleError, match="locked"):
        console.run(cursor, "set enable_external_access = true; select 1", row_limit=10, time_limit_s=5)


def test_a_variable_overrides_a_threshold_for_the_query(cursor) -> None:
    result = console.run(
        cursor,
        "set variable skew_tolerance_ms = 20; select skew_tolerance_ms from settings",
        row_limit=10,
        time_limit_s=5,
    )
    assert result.frame["skew_tolerance_ms"].iloc[0] == 20
