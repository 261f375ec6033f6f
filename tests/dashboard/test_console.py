"""The SQL console on a real store, through its real sealed worker: what an analyst may and may not do.

The worker is what keeps the store safe: `Sandbox.run` is called directly, past the friendly statement check,
with every way of writing we know of, and the store must come out unchanged.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from turnlens.dashboard import console
from turnlens.kernel.layout import CATALOG_FILE, segments_glob
from turnlens.queries.catalog import write_catalog


@pytest.fixture(scope="module")
def sandbox(store: Path) -> Iterator[console.Sandbox]:
    box = console.Sandbox(store)
    yield box
    box.close()


def _files(store: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(store)): (p.stat().st_size, p.stat().st_mtime_ns) for p in store.rglob("*")}


def _spans(box: console.Sandbox) -> int:
    return int(
        console.run(box, "select count(*) as n from spans", row_limit=1, time_limit_s=30).frame["n"][0]
    )


def test_views_still_read_their_segments(sandbox: console.Sandbox) -> None:
    assert _spans(sandbox) > 0


def test_a_replaced_catalog_is_read_by_the_same_worker(sandbox: console.Sandbox, store: Path) -> None:
    """The collector replaces the catalog every few seconds in a live store: the console reads the new one
    without starting its sealed worker again (seconds on a loaded machine), and keeps no older copy."""
    spans = _spans(sandbox)
    assert sandbox.process is not None and sandbox.copy is not None
    worker, first_copy = sandbox.process.pid, sandbox.copy
    write_catalog(store, segments_glob(store))
    replaced = (store / CATALOG_FILE).stat()
    result = console.run(
        sandbox,
        "select count(*) as n from spans",
        row_limit=1,
        time_limit_s=30,
        stamp=(replaced.st_ino, replaced.st_mtime_ns),
    )
    assert int(result.frame["n"][0]) == spans
    assert sandbox.process.pid == worker and sandbox.copy != first_copy
    assert sandbox.copies is not None and list(sandbox.copies.iterdir()) == [sandbox.copy]


def test_a_catalogue_briefly_gone_from_its_name_is_waited_for(sandbox: console.Sandbox, store: Path) -> None:
    """A mount that caches file names can miss the catalogue a rename just replaced: the console, given the
    stamp of a catalogue the dashboard saw, waits for it a moment instead of saying the store has none."""
    path = store / CATALOG_FILE
    seen = path.stat()
    away = path.with_name("away.duckdb")
    path.rename(away)
    back = threading.Timer(0.5, away.rename, args=(path,))
    back.start()
    try:
        result = console.run(
            sandbox, "select count(*) as n from spans", row_limit=1, time_limit_s=30, stamp=(seen.st_ino, -1)
        )
    finally:
        back.join()
    assert int(result.frame["n"][0]) > 0


def test_rows_are_cut_at_the_limit(sandbox: console.Sandbox) -> None:
    result = console.run(sandbox, "select * from range(50)", row_limit=10, time_limit_s=10)
    assert len(result.frame) == 10 and result.truncated


def test_a_slow_query_is_interrupted(sandbox: console.Sandbox) -> None:
    with pytest.raises(console.ConsoleError, match="time limit"):
        console.run(sandbox, "select count(*) from range(1000000000000)", row_limit=10, time_limit_s=0.5)
    assert _spans(sandbox) > 0  # the worker answers the next query


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
def test_anything_but_a_query_gets_a_friendly_refusal(sandbox: console.Sandbox, sql: str) -> None:
    with pytest.raises(console.ConsoleError, match="read-only|last statement"):
        console.run(sandbox, sql, row_limit=10, time_limit_s=5)


WRITES = [
    # EXPLAIN passes the statement check; the COPY under it once wrote a forged segment into the store
    "explain analyze copy (select 1 as x) to '{segments}/forged.parquet'",
    "explain analyze copy (select 1 as x) to '{derived}/forged.parquet'",
    "copy (select 1 as x) to '{segments}/forged.parquet'",
    "copy (select 'not parquet') to '{segments}/forged.parquet' (format csv)",
    "copy (select 1 as x) to '{tmp}/forged.csv'",
    "explain analyze copy (select * from spans) to '{segments}/x' (format parquet, partition_by (name))",
    "export database '{segments}/dump'",
    "attach '{segments}/new.duckdb'",
    "attach '{tmp}/new.duckdb'",
    "install httpfs",
    "load httpfs",
    "set temp_directory = '{segments}'",
    "set enable_external_access = true",
    "pragma enable_profiling",
    "set profiling_output = '{segments}/profile.json'",
    "checkpoint",
]


@pytest.mark.parametrize("template", WRITES)
def test_the_worker_writes_nothing_whatever_the_statement(
    sandbox: console.Sandbox, store: Path, tmp_path: Path, template: str
) -> None:
    segment_folder = next((store / "segments").rglob("*.parquet")).parent
    sql = template.format(segments=segment_folder, derived=store / "derived", tmp=tmp_path)
    before = _files(store)
    spans = _spans(sandbox)
    try:
        sandbox.run(
            [sql, "select 1"] if sql.startswith(("set", "pragma")) else [sql], row_limit=5, time_limit_s=10
        )
    except console.ConsoleError:
        pass  # refused is the usual answer; what matters is what is on disk afterwards
    assert _files(store) == before
    assert os.listdir(tmp_path) == []
    assert _spans(sandbox) == spans


@pytest.mark.parametrize(
    "target",
    ["/etc/hostname", "/proc/self/environ", "{store}/alerts/state.json", "{store}/settings.toml", "{home}"],
)
def test_files_outside_the_segments_stay_closed(sandbox: console.Sandbox, store: Path, target: str) -> None:
    path = target.format(store=store, home=Path.home() / ".duckdb")
    for function in ("read_text", "read_blob"):
        with pytest.raises(
            console.ConsoleError, match="disabled by configuration|Permission denied|No files"
        ):
            sandbox.run([f"select * from {function}('{path}')"], row_limit=5, time_limit_s=10)


def test_configuration_is_locked(sandbox: console.Sandbox) -> None:
    with pytest.raises(console.ConsoleError, match="locked"):
        sandbox.run(["set enable_external_access = true", "select 1"], row_limit=5, time_limit_s=5)


def test_a_variable_overrides_a_threshold_for_its_query_only(sandbox: console.Sandbox) -> None:
    result = console.run(
        sandbox,
        "set variable skew_tolerance_ms = 20; select skew_tolerance_ms from settings",
        row_limit=10,
        time_limit_s=5,
    )
    assert result.frame["skew_tolerance_ms"].iloc[0] == 20
    again = console.run(sandbox, "select skew_tolerance_ms from settings", row_limit=10, time_limit_s=5)
    assert again.frame["skew_tolerance_ms"].iloc[0] != 20


def test_only_selects_run_from_a_link() -> None:
    assert console.is_plain_read("select kind from divergences")
    assert console.is_plain_read("select 1; select 2")
    for sql in (
        "explain analyze copy (select 1) to 'x.parquet'",
        "set variable a = 1; select 1",
        "pragma version",
    ):
        assert not console.is_plain_read(sql)
