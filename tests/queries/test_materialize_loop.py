"""A running collector refreshes the snapshot on its interval: spans sent over OTLP/HTTP show up in the
per-turn
views once a snapshot covers them, without anyone running `turnlens materialize`."""

from __future__ import annotations

import time

import pytest
from otlp_samples import CollectorProcess
from turnlens.queries import catalog, materialize

from turnlens.cli import main


@pytest.mark.slow
def test_the_collector_refreshes_the_snapshot_of_what_it_received(tmp_path) -> None:  # noqa: ANN001
    store = tmp_path / "store"
    collector = CollectorProcess(store, "--materialize-interval", "1s", "--materialize-margin", "0s").start()
    try:
        assert (
            main(
                [
                    "simulate",
                    "--sessions",
                    "30",
                    "--seed",
                    "5",
                    "--endpoint",
                    f"http://{collector.http}",
                    "--quiet",
                ]
            )
            == 0
        )
        sent = time.time_ns()

        def snapshot_generation() -> str | None:
            """The generation the store's catalogue reads, once it covers everything sent."""
            snapshot = materialize.current_snapshot(store)
            if snapshot is None or snapshot.watermark <= sent:
                return None
            with catalog.connect(store) as con:
                views = {name for (name,) in con.execute("select view_name from duckdb_views()").fetchall()}
                if "turnlens_snapshot" not in views:
                    return None
                [(generation,)] = con.execute("select generation from turnlens_snapshot").fetchall()
            return generation if generation == snapshot.folder.name else None

        deadline = time.monotonic() + 90
        generation = None
        while generation is None and time.monotonic() < deadline:
            generation = snapshot_generation()
            time.sleep(0.5)
        assert generation is not None, collector.lines
        with catalog.connect(store) as con:
            [(turns,)] = con.execute("select count(*) from turns").fetchall()
            [(live_turns,)] = con.execute(
                "select count(distinct (session_id, turn_id)) from turn_events"
            ).fetchall()
        assert turns == live_turns > 30  # every turn sent, as the plain views count them
    finally:
        collector.stop()
