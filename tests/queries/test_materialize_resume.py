"""A full build whose process is killed (kill -9) half way is finished by the next run: the buckets it
published are kept, only the others are computed, and the derived state is then row for row what a build
that never stopped writes. A change of the views' inputs meanwhile makes the next run build again instead.
The build runs as a real `turnlens materialize` process on the simulator's fleet.
"""

from __future__ import annotations

import gzip
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from derivedstate import derived_tables, leftovers
from turnlens.kernel.layout import segments_glob
from turnlens.queries import manifest as derived_manifest
from turnlens.queries import materialize

from turnlens.cli import main

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"
TURNLENS = [sys.executable, "-m", "turnlens.cli"]
BUCKET_SPANS = 120  # a bucket of one or two hour partitions: five or so buckets on the fleet below
# each test starts a materialiser process and runs two or three full builds (a minute on a busy host)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulator's fleet (every scenario) spread over ten hours: one partition an hour."""
    folder = tmp_path_factory.mktemp("resume")
    out = folder / "fleet.jsonl.gz"
    assert main(["simulate", "--sessions", "40", "--sessions-per-minute", "0.07", "--seed", "5"]
                + ["--out", str(out), "--quiet"]) == 0
    (folder / "fleet.jsonl").write_bytes(gzip.decompress(out.read_bytes()))
    store = folder / "store"
    store.mkdir()
    shutil.copy(SAMPLE_DATA / "tool_registry.toml", store / "tool_registry.toml")
    assert main(["ingest", "--store", str(store), "--quiet", str(folder / "fleet.jsonl")]) == 0
    return store


@pytest.fixture
def store(fleet: Path, tmp_path: Path) -> Path:
    """A copy of the fleet's store with no derived state."""
    copy = tmp_path / "store"
    shutil.copytree(fleet, copy, ignore=shutil.ignore_patterns("derived", "readers.*", "turnlens.duckdb"))
    return copy


def kill_half_way(store: Path) -> derived_manifest.Manifest:
    """Starts `turnlens materialize --full` on the store and kills it (-9) once it has published a bucket but
    not the last; returns the manifest it left."""
    proc = subprocess.Popen(
        [*TURNLENS, "materialize", "--store", str(store), "--full", "--margin", "0"]
        + ["--bucket-spans", str(BUCKET_SPANS), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            found = derived_manifest.read_manifest(store)
            if found is not None and found.partitions and not found.complete:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"the build ended before it was killed: {proc.stderr.read()}"  # type: ignore[union-attr]
    found = derived_manifest.read_manifest(store)
    assert found is not None and not found.complete and found.partitions_total is not None
    assert 0 < len(found.partitions) < found.partitions_total
    return found


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
    died = kill_half_way(store)
    assert list((store / "derived").glob(".shuffle-v*")), "the dead run left its units' files"

    resumed = run_again(store)
    assert resumed["mode"] == "full" and resumed["resumed_from"] == died.version
    published = {part for part in died.partitions}
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


def test_an_edited_tool_registry_makes_the_next_run_build_again_from_scratch(store: Path) -> None:
    died = kill_half_way(store)
    # the tool gets a tier: the side effects of the published buckets are no longer what the views compute
    with (store / "tool_registry.toml").open("a") as registry:
        registry.write('\n[tools.turnlens_resume_probe]\ntier = "soft_irreversible"\n')

    rebuilt = run_again(store)
    assert rebuilt["mode"] == "full" and "resumed_from" not in rebuilt
    assert rebuilt["buckets_built"] == rebuilt["buckets"] and rebuilt["buckets_reused"] == 0
    assert rebuilt["not_resumed"]["version"] == died.version
    assert "tool_registry.toml" in rebuilt["not_resumed"]["reason"]
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None and manifest.complete
    assert all(version == rebuilt["version"] for version in manifest.partitions.values())
    assert leftovers(store) == []
