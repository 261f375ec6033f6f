"""The dashboard's connection never stands in a writer's way and follows the catalog when it is rewritten."""

from __future__ import annotations

from pathlib import Path

import pytest
from turnlens.dashboard import data
from turnlens.queries import catalog

from . import storefixture


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


def test_a_store_without_catalog_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(data.StoreNotReady, match="turnlens ingest"):
        data._Catalog(tmp_path).cursor()


def test_every_named_query_binds_against_the_views(store: Path) -> None:
    con = catalog.connect(store)
    data.harden(con, store)
    params = {
        "from_ms": None,
        "to_ms": None,
        "bucket_ms": 60_000,
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
            sql = data.load_sql(name)
            bound = {k: v for k, v in params.items() if f"${k}" in sql}
            data.run_named(con.cursor(), name, bound)  # raises on a column or view that is not there
    finally:
        con.close()
