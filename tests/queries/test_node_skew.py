"""node_skew's p95 over many skews: within 1 % of the exact one, in memory that does not grow with them."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from turnlens.queries import sqlfiles

NODE_SKEW = (sqlfiles.QUERIES_DIR / "views" / "node_skew.sql").read_text()


TURN_NODE_SKEW = (sqlfiles.QUERIES_DIR / "views" / "turn_node_skew.sql").read_text()
TURN_NODE_SKEW_OF = sqlfiles.split_statements(TURN_NODE_SKEW)[0]  # the macro, not the view over turn_events
# the sums node_skew reads, over turn_node_skew
NODE_SKEW_PARTS = [
    (sqlfiles.QUERIES_DIR / "views" / f"{part}.sql").read_text()
    for part in ("node_skew_minutes", "node_skew_histogram")
]


def _store(con: duckdb.DuckDBPyConnection) -> None:
    """The events turn_node_skew is made of (the turn_events columns it reads) and the two settings node_skew
    reads, as tables; then turn_node_skew through its own macro, and node_skew over it."""
    con.execute("create table settings as select 100.0 as skew_tolerance_ms, 200.0 as skew_anomaly_ms")
    con.execute(
        "create table events (session_id varchar, turn_id varchar, node varchar, service_name varchar, "
        "wall_ns bigint, hlc varchar, skew_ms double)"
    )
    con.execute(TURN_NODE_SKEW_OF)
    con.execute("create view turn_node_skew as select * from turn_node_skew_of('events')")
    for part in NODE_SKEW_PARTS:
        con.execute(part)
    con.execute(NODE_SKEW)


def _add_turns(
    con: duckdb.DuckDBPyConnection, node: str, minute: str, skews: np.ndarray, per_turn: int
) -> None:
    """`skews` (signed) as events of turns of `per_turn` skews each, all in `minute`."""
    start_ns = int(np.datetime64(minute, "ns").astype(np.int64))
    rows = [
        (f"s{i // per_turn}", f"t{i // per_turn}", node, f"svc-{node}", start_ns + i, "hlc", float(skew))
        for i, skew in enumerate(skews)
    ]
    con.executemany("insert into events values (?, ?, ?, ?, ?, ?, ?)", rows)


def test_the_p95_of_each_minute_is_within_one_percent_of_the_exact_one() -> None:
    rng = np.random.default_rng(7)
    con = duckdb.connect()
    _store(con)
    minutes = {
        # spread over six orders of magnitude, a node whose clock is exact, one far behind, a lone event
        ("wide", "2026-01-01 10:00:00"): rng.lognormal(0.0, 3.0, 20_000) * rng.choice([-1, 1], 20_000),
        ("exact", "2026-01-01 10:00:00"): np.concatenate([np.zeros(990), rng.uniform(0, 5, 10)]),
        ("behind", "2026-01-01 10:01:00"): rng.normal(480.0, 15.0, 5_000),
        ("lone", "2026-01-01 10:02:00"): np.array([-37.5]),
    }
    for (node, minute), skews in minutes.items():
        _add_turns(con, node, minute, skews, per_turn=13)

    got = {
        (node, str(minute)): (events, p95, mx, mean)
        for node, minute, events, p95, mx, mean in con.execute(
            "select node, minute, events, p95_skew_ms, max_skew_ms, mean_skew_ms from node_skew"
        ).fetchall()
    }
    assert set(got) == set(minutes)
    for key, skews in minutes.items():
        events, p95, mx, mean = got[key]
        absolute = np.sort(np.abs(skews))
        exact = absolute[int(np.ceil(0.95 * len(absolute))) - 1]  # quantile_disc's 95th percentile
        assert events == len(skews)
        assert mx == absolute[-1] and mean == pytest.approx(skews.mean(), abs=1e-6)
        assert p95 == pytest.approx(exact, rel=0.01, abs=1e-6), key
    assert got[("exact", "2026-01-01 10:00:00")][1] == 0  # 95 % of its skews are zero


def test_a_minute_of_millions_of_skews_fits_a_memory_limit_an_exact_p95_does_not() -> None:
    con = duckdb.connect(config={"threads": 2})
    _store(con)
    # 12M skews in one node's minute, in turns of 40 (300,000 turn_node_skew rows, made with more memory than
    # the query is then given): 96 MB holds the lists on disk-backed pages, not every skew in one state
    con.execute("set memory_limit = '2GB'")
    con.execute(
        """
        insert into events
        select
            't' || (i // 40), 't' || (i // 40), 'n1', 'svc', 1767261600000000000 + i, 'hlc',
            (i * 7919 % 100000) / 100.0
        from range(12000000) as r(i)
        """
    )
    con.execute("create table stored as select * from turn_node_skew_of('events')")
    con.execute("create or replace view turn_node_skew as select * from stored")
    con.execute("set memory_limit = '96MB'")
    [(events, p95)] = con.execute("select events, p95_skew_ms from node_skew").fetchall()
    assert events == 12_000_000
    # the skews are 0.00 .. 999.99 ms in equal numbers: the exact p95 is 949.99 ms
    assert p95 == pytest.approx(949.99, rel=0.01)
    with pytest.raises(duckdb.OutOfMemoryException):
        con.execute(
            "select quantile_cont(s, 0.95) from (select unnest(abs_skews) as s from turn_node_skew)"
        ).fetchall()
