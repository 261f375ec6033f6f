"""A running collector refreshes the snapshot on its interval: spans sent over OTLP/HTTP show up in the
per-turn
views once a snapshot covers them, without anyone running `turnlens materialize`."""

from __future__ import annotations

import json
import signal
import time

import pyarrow.parquet as pq
import pytest
from otlp_samples import CollectorProcess
from turnlens.queries import catalog
from turnlens.queries import manifest as derived_manifest

from turnlens.cli import main


@pytest.mark.slow
def test_the_collector_refreshes_the_snapshot_of_what_it_received(tmp_path) -> None:  # noqa: ANN001
    store = tmp_path / "store"
    log = tmp_path / "materialize.jsonl"
    collector = CollectorProcess(
        store, "--compact-interval", "2s", "--materialize-log", str(log)
    ).start()  # the default materialise schedule
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
            """The generation the store's catalogue reads, once whole and covering everything sent."""
            snapshot = derived_manifest.current_snapshot(store)
            if snapshot is None or not snapshot.complete or snapshot.watermark <= sent:
                return None
            with catalog.connect(store) as con:
                views = {name for (name,) in con.execute("select view_name from duckdb_views()").fetchall()}
                if "turnlens_snapshot" not in views:
                    return None
                [(generation,)] = con.execute("select generation from turnlens_snapshot").fetchall()
            return generation if generation == snapshot.generation else None

        deadline = time.monotonic() + 180  # the materialiser runs niced: slow on a busy machine
        generation = None
        while generation is None and time.monotonic() < deadline:
            generation = snapshot_generation()
            time.sleep(0.5)
        assert generation is not None, collector.lines
        # each refresh appended its summary: the one the catalogue reads is there, with what it took
        text = log.read_text()
        logged = [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]
        published = {run["generation"]: run for run in logged}
        assert generation in published, logged
        assert sum(run.get("new_copies") or 0 for run in logged) > 0
        assert published[generation]["cpu_seconds"] >= 0 and published[generation]["step_seconds"]
        with catalog.connect(store) as con:
            [(turns,)] = con.execute("select count(*) from turns").fetchall()
            [(live_turns,)] = con.execute(
                "select count(distinct (session_id, turn_id)) from turn_events"
            ).fetchall()
        assert turns == live_turns > 30  # every turn sent, as the plain views count them

        def sorted_merged_segment() -> bool:
            for path in (store / "segments").glob("date=*/*.parquet"):
                ids = pq.read_table(path, columns=["trace_id"])["trace_id"].to_pylist()
                if len(ids) >= 100 and ids == sorted(ids):
                    return True
            return False

        # eight more small segments (fewer than 100 spans each: only a merge makes the segment looked for),
        # each written by an importer beside the collector
        small = tmp_path / "small.jsonl"
        assert main(["simulate", "--sessions", "4", "--seed", "11", "--out", str(small), "--quiet"]) == 0
        for _ in range(8):
            assert main(["ingest", "--store", str(store), "--quiet", str(small)]) == 0
        deadline = time.monotonic() + 60
        while not sorted_merged_segment() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert sorted_merged_segment(), "the collector's compaction merged the small segments, sorted"
    finally:
        collector.stop()


def test_a_stopped_collector_leaves_per_turn_views_that_cover_its_last_span(tmp_path) -> None:  # noqa: ANN001
    store = tmp_path / "store"
    # the loop's first refresh is an hour away: only the refresh at stop can cover what is sent
    # (and a shutdown grace that a loaded machine cannot outrun: the refresh at stop has that long)
    collector = CollectorProcess(store, "--materialize-interval", "1h", "--shutdown-grace", "120s").start()
    try:
        endpoint = f"http://{collector.http}"
        assert main(["simulate", "--sessions", "6", "--seed", "3", "--endpoint", endpoint, "--quiet"]) == 0
        last_acknowledged = time.time_ns()
    finally:
        assert collector.stop(timeout_s=150) == 0, collector.lines
    assert "per-turn views cover every span stored" in collector.lines[-1], collector.lines
    snapshot = derived_manifest.current_snapshot(store)
    assert snapshot is not None and snapshot.complete and snapshot.watermark >= last_acknowledged
    with catalog.connect(store) as con:
        [(watermark,)] = con.execute("select watermark_unix_nano from turnlens_snapshot").fetchall()
        [(turns,)] = con.execute("select count(*) from turns").fetchall()
        [(live_turns,)] = con.execute(
            "select count(distinct (session_id, turn_id)) from turn_events_from('spans')"  # the live form
        ).fetchall()
    assert watermark >= last_acknowledged
    assert turns == live_turns > 6


def test_a_collector_restarted_after_a_crash_covers_its_predecessors_spans_at_stop(tmp_path) -> None:  # noqa: ANN001
    store = tmp_path / "store"
    # no loop refresh in either life: what the killed collector acknowledged is covered only if the restarted
    # one, which receives nothing, still refreshes at its stop
    args = ("--materialize-interval", "1h", "--shutdown-grace", "120s")
    collector = CollectorProcess(store, *args).start()
    try:
        endpoint = f"http://{collector.http}"
        assert main(["simulate", "--sessions", "4", "--seed", "7", "--endpoint", endpoint, "--quiet"]) == 0
    finally:
        collector.signal(signal.SIGKILL)
        assert collector.proc is not None
        collector.proc.wait(10)
    assert derived_manifest.current_snapshot(store) is None, "the killed collector never refreshed"
    collector.start()
    assert collector.stop(timeout_s=150) == 0, collector.lines
    assert "per-turn views cover every span stored" in collector.lines[-1], collector.lines
    with catalog.connect(store) as con:
        [(turns,)] = con.execute("select count(*) from turns").fetchall()
        [(live_turns,)] = con.execute(
            "select count(distinct (session_id, turn_id)) from turn_events_from('spans')"
        ).fetchall()
    assert turns == live_turns > 4
