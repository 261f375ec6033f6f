"""What a store's derived state holds, read from the files its manifest names: what tests compare of two
builds of the same store (on two engines, or a build finished by a later run and one that never stopped);
and a full build killed half way, as a real process."""

from __future__ import annotations

import gzip
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
from storebuilder import rounded
from turnlens.queries import catalog
from turnlens.queries import manifest as derived_manifest

from turnlens.cli import main

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"


def derived_tables(store: Path) -> dict[str, list[tuple]]:
    """Every row of every derived table (the eight views and the three identity tables), from the files the
    current manifest names, with the partitions it names."""
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None and manifest.complete
    con = duckdb.connect()
    tables = {
        table: [
            rounded(row)
            for row in con.execute(
                f"select * from read_parquet({derived_manifest.sql_list(manifest.table_files(table))})"
                " order by all"
            ).fetchall()
        ]
        for table in derived_manifest.TABLES
    }
    con.close()
    return tables | {"partitions": sorted(manifest.partitions)}  # type: ignore[dict-item]


# the store-wide views a store with derived state adds up from per-partition rollups and the partitions deltas
# touch: they must equal the same views over every turn's rows computed live
ROLLED_UP = (
    "node_skew_minutes",
    "node_skew_histogram",
    "node_skew",
    "tool_observed",
    "tool_audit",
    "turn_minutes",
    "finding_minutes",
)
# the live views the others read, held once each under its own name (a temporary table shadows the view of the
# same name for every view and macro that reads it): derived again by each reader, they cost seconds of
# planning on a small store (tool_audit reads tool_observed twice, which reads the ledger, the claims and the
# findings, each deriving turn_events again: 6-7 s of a test's 25). cancel_acks is held under another name:
# its view reads the spans on a path of its own
HELD = {
    "turn_events": "main.turn_events",
    "side_effects": "side_effects_of('turn_events')",
    "divergences": "divergences_of('turn_events')",
    "live_cancel_acks": "cancel_acks_of('turn_events')",
}
# each derived view as a catalogue without derived state defines it, over the relations held above (those
# held read as they are)
LIVE = {view: f"{view}_of('turn_events')" for view in derived_manifest.VIEWS} | {
    "side_effects": "side_effects",
    "divergences": "divergences",
    "cancel_acks": "live_cancel_acks",
    "turn_usage": "turn_usage_of('turn_events', 'live_cancel_acks')",
    "turns": "turns_of('turn_events', 'side_effects', 'divergences', 'live_cancel_acks')",
}


def live_rows(store: Path, views: tuple[str, ...] = derived_manifest.VIEWS) -> dict[str, list[tuple]]:
    """Every row of the derived views (and of ROLLED_UP ones named in `views`) computed from every stored copy
    now, in a catalogue of our own over the store's segments with no derived state: what the derived state
    must equal."""
    con = catalog.live_connection(store)
    for name, source in HELD.items():
        con.execute(f"create temp table {name} as select * from {source}")
    rows = {
        view: con.execute(f"select * from {LIVE.get(view, view)} order by all").fetchall() for view in views
    }
    con.close()
    return rows


def catalogue_rows(store: Path, views: tuple[str, ...] = derived_manifest.VIEWS) -> dict[str, list[tuple]]:
    """Every row of the derived views as the store's catalogue answers them (from its derived state)."""
    with catalog.connect(store) as con:
        return {view: con.execute(f"select * from {view} order by all").fetchall() for view in views}


def leftovers(store: Path) -> list[str]:
    """What a materialiser's run leaves only while it runs: the units' input files of a full build and its
    identity's chunks, DuckDB's spill files, temporary files, a full build's first pass. Empty once a run has
    finished the state."""
    derived = store / derived_manifest.DERIVED_DIR
    found = [*derived.glob(".shuffle-v*"), *derived.glob(".identity-v*"), *derived.glob(".build-v*")]
    found += list(derived.glob("**/*.tmp"))
    found += [path for path in derived.glob(".spill/**/*") if path.is_file()]
    found += list(derived.glob("*/*/.v*.slice-*.parquet"))
    return sorted(str(path.relative_to(derived)) for path in found)


def hourly_fleet(folder: Path) -> Path:
    """A store of the simulator's fleet (every scenario) spread over ten hours: one partition an hour, so a
    full build in small buckets publishes several before its last."""
    out = folder / "fleet.jsonl.gz"
    assert (
        main(
            ["simulate", "--sessions", "40", "--sessions-per-minute", "0.07", "--seed", "5"]
            + ["--out", str(out), "--quiet"]
        )
        == 0
    )
    (folder / "fleet.jsonl").write_bytes(gzip.decompress(out.read_bytes()))
    store = folder / "store"
    store.mkdir()
    shutil.copy(SAMPLE_DATA / "tool_registry.toml", store / "tool_registry.toml")
    assert main(["ingest", "--store", str(store), "--quiet", str(folder / "fleet.jsonl")]) == 0
    return store


def copy_store(store: Path, target: Path) -> Path:
    """The store's segments and tool registry, without its derived state or catalogue."""
    ignored = shutil.ignore_patterns("derived", "readers.*", "turnlens.duckdb")
    shutil.copytree(store, target, ignore=ignored)
    return target


def stop_half_way(store: Path, options: list[str], signum: int) -> tuple[int, str]:
    """Starts `turnlens materialize --full` (with `options`) on the store and sends it `signum` once it has
    published a bucket but not the last (a moment its next bucket's queries are running); returns its exit
    status and what it wrote to stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "turnlens.cli", "materialize", "--store", str(store), "--full"]
        + ["--margin", "0", "--quiet", *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            found = derived_manifest.read_manifest(store)
            if found is not None and found.partitions and not found.complete:
                proc.send_signal(signum)
                break
            time.sleep(0.02)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, stderr


def kill_half_way(store: Path, options: list[str]) -> derived_manifest.Manifest:
    """Starts `turnlens materialize --full` (with `options`) on the store and kills it (-9) once it has
    published a bucket but not the last; returns the manifest it left."""
    returncode, stderr = stop_half_way(store, options, signal.SIGKILL)
    assert returncode == -signal.SIGKILL, f"the build ended before it was killed: {stderr}"
    found = derived_manifest.read_manifest(store)
    assert found is not None and not found.complete and found.partitions_total is not None
    assert 0 < len(found.partitions) < found.partitions_total
    return found
