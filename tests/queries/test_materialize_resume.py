"""A full build whose process is killed (kill -9) half way is finished by the next run: the buckets it
published are kept, only the others are computed, and the derived state is then row for row what a build
that never stopped writes. A change of the views' inputs meanwhile makes the next run build again instead.
The build runs as a real `turnlens materialize` process on the simulator's fleet.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from derivedstate import copy_store, derived_tables, hourly_fleet, kill_half_way, leftovers, stop_half_way
from turnlens.collector import compaction
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog, materialize
from turnlens.queries import manifest as derived_manifest

TURNLENS = [sys.executable, "-m", "turnlens.cli"]
BUCKET_SPANS = 120  # a bucket of one or two hour partitions: five or so buckets on the fleet below
# each test starts a materialiser process and runs two or three full builds (a minute on a busy host)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hourly_fleet(tmp_path_factory.mktemp("resume"))


@pytest.fixture
def store(fleet: Path, tmp_path: Path) -> Path:
    """A copy of the fleet's store with no derived state."""
    return copy_store(fleet, tmp_path / "store")


def run_again(store: Path) -> dict:
    """The next run, as a person (or the collector's loop) starts it: the command line, its JSON line."""
    proc = subprocess.run(
        [*TURNLENS, "materialize", "--store", str(store), "--margin", "0", "--json"]
        + ["--bucket-spans", str(BUCKET_SPANS)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    summary: dict = json.loads(proc.stdout)
    return summary


def test_a_full_build_killed_half_way_is_resumed_and_equals_one_that_never_stopped(
    store: Path, tmp_path: Path
) -> None:
    untouched = tmp_path / "untouched"
    shutil.copytree(store, untouched)
    died = kill_half_way(store, ["--bucket-spans", str(BUCKET_SPANS)])
    assert list((store / "derived").glob(".shuffle-v*")), "the dead run left its units' files"

    resumed = run_again(store)
    assert resumed["mode"] == "full" and resumed["resumed_from"] == died.version
    published = set(died.partitions)
    assert 0 < resumed["buckets_reused"] and resumed["buckets_built"] < resumed["buckets"]
    assert resumed["buckets_reused"] + resumed["buckets_built"] == resumed["buckets"]
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None and manifest.complete and manifest.watermark == died.watermark
    # the published buckets' files are those the dead run wrote, not written again
    assert {part for part, version in manifest.partitions.items() if version == died.version} == published
    assert leftovers(store) == [], "the dead run's shuffle, spill and first pass are gone"

    fresh = materialize.materialize(
        untouched, segments_glob(untouched), full=True, margin_s=0, bucket_spans=BUCKET_SPANS
    )
    assert fresh["buckets"] == resumed["buckets"] and "resumed_from" not in fresh
    assert derived_tables(store) == derived_tables(untouched)

    # then the usual refresh, from the build's watermark
    assert run_again(store)["mode"] == "refresh"
    assert derived_tables(store) == derived_tables(untouched)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_build_stopped_by_a_signal_exits_quietly_and_the_next_run_finishes_it(
    store: Path, signum: int
) -> None:
    # Ctrl-C on `turnlens demo` reaches its materialiser too, and the collector stops its own with SIGTERM;
    # DuckDB interrupts the query running ("Query interrupted"), which ended the demo's log in a traceback
    returncode, stderr = stop_half_way(store, ["--bucket-spans", str(BUCKET_SPANS)], signum)
    assert returncode == 128 + signum, stderr
    assert "Traceback" not in stderr and "interrupted" not in stderr, stderr
    assert run_again(store)["mode"] == "full"
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None and manifest.complete
    assert leftovers(store) == []


def test_an_edited_tool_registry_makes_the_next_run_build_again_from_scratch(store: Path) -> None:
    died = kill_half_way(store, ["--bucket-spans", str(BUCKET_SPANS)])
    with catalog.live_connection(store) as live:
        [(turns,)] = live.execute("select count(*) from turns").fetchall()
    with catalog.connect(store) as con:
        assert con.execute("select count(*) from turns").fetchone() < (turns,), "half the buckets are read"
    # the tool gets a tier: the side effects of the published buckets are no longer what the views compute
    with (store / "tool_registry.toml").open("a") as registry:
        registry.write('\n[tools.turnlens_resume_probe]\ntier = "soft_irreversible"\n')
    # a catalogue written meanwhile (a collector starting: a new process, the old catalogue in place) reads
    # the views live, not the buckets computed under the old registry
    views = subprocess.run(
        [*TURNLENS, "views", "--store", str(store), "--rebuild"], capture_output=True, text=True, timeout=120
    )
    assert views.returncode == 0, views.stderr
    with catalog.connect(store) as con:
        assert con.execute("select count(*), min(partitions) from turns, turnlens_snapshot").fetchone() == (
            turns,
            0,
        )

    rebuilt = run_again(store)
    assert rebuilt["mode"] == "full" and "resumed_from" not in rebuilt
    assert rebuilt["buckets_built"] == rebuilt["buckets"] and rebuilt["buckets_reused"] == 0
    assert rebuilt["not_resumed"]["version"] == died.version
    assert "tool_registry.toml" in rebuilt["not_resumed"]["reason"]
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None and manifest.complete
    assert all(version == rebuilt["version"] for version in manifest.partitions.values())
    assert leftovers(store) == []


def received_a_month_earlier(store: Path, started_before_ns: int) -> None:
    """Moves the copies of the spans that started before `started_before_ns` to a segment received a month
    ago, in that day's folder, as if that part of the fleet had been exported then."""
    month_ago = time.time_ns() - 30 * 86_400 * 10**9
    day = dt.datetime.fromtimestamp(month_ago / 1e9, tz=dt.UTC).date().isoformat()
    for path in sorted((store / "segments").glob("date=*/*.parquet")):
        if path.parent.name == "date=1970-01-01":  # the placeholder
            continue
        table = pq.read_table(path)
        early = pc.less(table["start_time_unix_nano"], started_before_ns)
        old, new = table.filter(early), table.filter(pc.invert(early))
        column = old.schema.get_field_index("received_unix_nano")
        old = old.set_column(column, "received_unix_nano", pa.array([month_ago] * old.num_rows, pa.int64()))
        (store / "segments" / f"date={day}").mkdir(exist_ok=True)
        pq.write_table(old, store / "segments" / f"date={day}" / path.name)
        pq.write_table(new, path)


def test_retention_dropping_a_day_the_build_read_makes_the_next_run_build_again(store: Path) -> None:
    starts = pq.read_table(store / "segments", columns=["start_time_unix_nano"])["start_time_unix_nano"]
    first, last = pc.min(starts).as_py(), pc.max(starts).as_py()
    received_a_month_earlier(store, (first + last) // 2)
    died = kill_half_way(store, ["--bucket-spans", str(BUCKET_SPANS)])
    # retention removes the month-old day: the build read its segment, and its turns are in the buckets left
    assert compaction.apply_retention(store / "segments", 20 * 86_400, grace_s=0) == 1

    rebuilt = run_again(store)
    assert "resumed_from" not in rebuilt and rebuilt["buckets_reused"] == 0
    assert rebuilt["not_resumed"]["version"] == died.version
    assert rebuilt["not_resumed"]["reason"] == "retention removed 1 of the segments it read"
    assert leftovers(store) == []
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None and manifest.complete
    assert 0 < len(manifest.partitions) < died.partitions_total, "only the later half's partitions are left"
