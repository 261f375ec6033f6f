"""The dashboard's connection never stands in a writer's way and follows the catalog when it is rewritten."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from turnlens.dashboard import data
from turnlens.queries import catalog

from . import storefixture
from .storefixture import CANCELLED, CLEAN


def test_catalog_rewritten_under_an_open_dashboard_is_picked_up(tmp_path: Path) -> None:
    store = storefixture.build_store(tmp_path / "store")
    opened = data._Catalog(store)
    cursor, first = opened.cursor()
    before = data.run_named(cursor, "overview_counts", {"from_ms": None, "to_ms": None})
    # a writer rebuilds the catalog while the dashboard holds it open: it must not be blocked
    catalog.write_catalog(store, str(store / "segments" / "*" / "*.parquet"))
    cursor2, second = opened.cursor()
    assert second != first
    after = data.run_named(cursor2, "overview_counts", {"from_ms": None, "to_ms": None})
    assert after.equals(before)
    # and it is the new file that is read, not the instance DuckDB keeps open for the same path
    (store / "settings.toml").write_text("slo_cancel_to_ack_ms = 250\n")
    catalog.write_catalog(store, str(store / "segments" / "*" / "*.parquet"))
    cursor3, third = opened.cursor()
    assert third != second
    assert data.run_named(cursor3, "dashboard_settings", {})["slo_cancel_to_ack_ms"].iloc[0] == 250


def test_a_store_without_catalog_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(data.StoreNotReady, match="turnlens ingest"):
        data._Catalog(tmp_path).cursor()


def test_a_catalogue_briefly_gone_from_its_name_under_an_open_dashboard_is_waited_for(tmp_path: Path) -> None:
    """A mount that caches file names can miss the catalogue a rename just replaced: the dashboard, having
    seen it, waits for it to come back (at most catalog.CATALOG_REOPEN_S) instead of saying there is none."""
    store = storefixture.build_store(tmp_path / "store")
    opened = data._Catalog(store)
    opened.cursor()[0].close()
    path = store / catalog.CATALOG_FILE
    away = path.with_name("away.duckdb")
    path.rename(away)
    back = threading.Timer(0.5, away.rename, args=(path,))
    back.start()
    try:
        cursor, _ = opened.cursor()
    finally:
        back.join()
    assert len(data.run_named(cursor, "overview_counts", {"from_ms": None, "to_ms": None})) == 1
    path.rename(away)  # gone for good: said so once the wait is over
    started = time.monotonic()
    with pytest.raises(data.StoreNotReady, match="turnlens ingest"):
        opened.cursor()
    assert time.monotonic() - started >= catalog.CATALOG_REOPEN_S


def test_every_named_query_binds_against_the_views(store: Path) -> None:
    con = catalog.connect(store)
    data.harden(con, store)
    params = {
        "from_ms": None,
        "to_ms": None,
        "bucket_ms": 60_000,
        "window_size": "5m",
        "session": "",
        "turn": "",
        "statuses": [],
        "kinds": [],
        "tools": [],
        "tiers": [],
        "limit": 10,
    }
    try:
        for name in data.query_names():
            if name == "snapshot_time":  # this store has no snapshot (tested below)
                continue
            sql = data.load_sql(name)
            bound = {k: v for k, v in params.items() if f"${k}" in sql}
            data.run_named(con.cursor(), name, bound)  # raises on a column or view that is not there
        frames = data.run_turn(con.cursor(), *CANCELLED)  # the page's way: the turn read once for all
        not_ready = {name: frame for name, frame in frames.items() if isinstance(frame, str)}
        assert not not_ready
        for name in data.TURN_QUERIES:  # each alone reads the turn itself, and answers the same
            alone = data.run_named(con.cursor(), name, {"session": CANCELLED[0], "turn": CANCELLED[1]})
            pd.testing.assert_frame_equal(alone, frames[name])
        assert len(frames["turn_events"]) and len(frames["turn_ledger"]) and len(frames["turn_findings"])
    finally:
        con.close()


def test_one_turn_queries_read_the_turn_they_are_given(store: Path) -> None:
    """The held rows are the turn asked for: the same cursor asked about another turn answers for that one."""
    con = catalog.connect(store)
    data.harden(con, store)
    try:
        cursor = con.cursor()
        cancelled = data.run_turn(cursor, *CANCELLED)
        clean = data.run_turn(cursor, *CLEAN)
    finally:
        con.close()
    assert set(cancelled["turn_events"]["turn_id"]) == {CANCELLED[1]}
    assert set(clean["turn_events"]["turn_id"]) == {CLEAN[1]}
    assert len(cancelled["turn_cancel"]) == 1 and len(clean["turn_cancel"]) == 0
    assert "cancelled_but_committed" in set(cancelled["turn_findings"]["kind"])
    assert "cancelled_but_committed" not in set(clean["turn_findings"]["kind"])


def test_the_store_wide_queries_answer_the_same_from_a_snapshot(store: Path, snapshot_store: Path) -> None:
    """The pages read `turns`, `side_effects`... whether live (no snapshot yet) or materialised: same rows."""
    live, materialised = (catalog.connect(path) for path in (store, snapshot_store))
    try:
        assert data.run_named(live.cursor(), "snapshot_time", {}).empty  # nothing built: the views are live
        [snapshot] = data.run_named(materialised.cursor(), "snapshot_time", {}).itertuples()
        assert snapshot.built_ms >= snapshot.watermark_ms > 0
        window = {"from_ms": None, "to_ms": None}
        for name, params in [
            ("overview_counts", window),
            ("store_bounds", {}),
            ("filter_options", {}),
            ("recent_turns", {"limit": 10}),
            ("findings_by_kind", window | {"bucket_ms": 60_000}),
        ]:
            expected = data.run_named(live.cursor(), name, params)
            assert len(expected), name
            pd.testing.assert_frame_equal(data.run_named(materialised.cursor(), name, params), expected)
    finally:
        live.close()
        materialised.close()
