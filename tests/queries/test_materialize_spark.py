"""The derived state built on Spark (`--engine spark`) is the derived state DuckDB builds, table for table
and row for row, on the simulator's fleet: retried calls, idempotency keys shared across turns, linked
side-channel traces, and spans arriving in a later export than the rest of their turn. A real local[2] Spark
(a JVM and two Python workers) runs the buckets; one session serves the module.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from derivedstate import (
    catalogue_rows,
    copy_store,
    derived_tables,
    hourly_fleet,
    kill_half_way,
    leftovers,
    live_rows,
)
from pyspark.sql import SparkSession
from storebuilder import rounded
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog, materialize, spark_engine
from turnlens.queries import manifest as derived_manifest

from turnlens.cli import main

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"
# a JVM starts (~10 s), and each test runs several full builds: minutes when the host is busy
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers import this turnlens
    session = (
        SparkSession.builder.master("local[2]")
        .appName("turnlens tests")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulator's fleet, ingested in two exports: every other request first, the rest later, so most
    turns, keys and links have copies in two segments received apart."""
    folder = tmp_path_factory.mktemp("spark")
    out = folder / "fleet.jsonl.gz"
    assert main(["simulate", "--sessions", "120", "--seed", "11", "--out", str(out), "--quiet"]) == 0
    lines = _share_keys(gzip.decompress(out.read_bytes())).splitlines(keepends=True)
    store = folder / "store"
    store.mkdir()
    shutil.copy(SAMPLE_DATA / "tool_registry.toml", store / "tool_registry.toml")
    for name, half in (("first", lines[0::2]), ("second", lines[1::2])):
        (folder / f"{name}.jsonl").write_bytes(b"".join(half))
        assert main(["ingest", "--store", str(store), "--quiet", str(folder / f"{name}.jsonl")]) == 0
    return store


def _share_keys(fleet: bytes, every: int = 8) -> bytes:
    """The fleet with one idempotency key in place of every `every`-th of its keys: a client reusing a key
    across sessions, so that turns throughout the store (and so in several units) carry it."""
    attribute = rb'"turnlens.idempotency_key","value":\{"stringValue":"(\w+)"'
    keys = list(dict.fromkeys(re.findall(attribute, fleet)))
    assert len(keys) > 10 * every
    for key in keys[::every]:
        fleet = fleet.replace(b'"' + key + b'"', b'"k-reused-across-sessions"')
    return fleet


def build(store: Path, **options: Any) -> dict[str, Any]:
    return materialize.materialize(store, segments_glob(store), full=True, margin_s=0, **options)


def test_spark_derives_every_table_row_for_row_as_duckdb_does(
    spark: SparkSession, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # buckets small enough that a partition is larger than one: it is computed in slices, one task each. A
    # Spark task's DuckDB runs on one thread, which resolves each trace's identity a chunk of traces at a time
    # past fewer copies than two threads do: here a chunk for each of the store's two segments on Spark, one
    # pass over the store in the local build on two threads
    monkeypatch.setattr(materialize, "IDENTITY_CHUNK_COPIES_ONE_THREAD", 100)
    local = build(store, bucket_spans=1_000, threads=2)
    by_duckdb = derived_tables(store)
    assert len(by_duckdb["divergences"]) > 0

    engine = spark_engine.SparkBuckets("local[2]")
    on_spark = build(store, bucket_spans=1_000, engine=engine)
    assert on_spark["mode"] == "full" and on_spark["version"] == local["version"] + 1
    assert on_spark["buckets"] == local["buckets"]
    units = [task for task in engine.tasks if task["kind"] == spark_engine.UNIT_TASK]
    assert any(task["slice"] > 0 for task in units), "some partition was computed in slices"
    assert len({task["worker_pid"] for task in units}) == 2, "both workers ran buckets"
    by_spark = derived_tables(store)
    for table in by_duckdb:
        assert by_spark[table] == by_duckdb[table], table
    # and what every reader sees through the catalogue: the views as the live ones compute them
    assert rounded(catalogue_rows(store)) == rounded(live_rows(store))
    tasks = engine.summary()
    assert tasks["unit_tasks"] == on_spark["units"], "one task per unit"
    # the fleet's turns sharing keys across units: their key facts by tasks of their own, whose files every
    # unit's task reads (one started before them would fail on a missing file)
    assert on_spark["key_fact_turns"] == local["key_fact_turns"] > 0
    assert tasks["key_facts_tasks"] == on_spark["key_fact_units"] == local["key_fact_units"] > 0
    # the identity's chunks, the shuffle (in one batch of units per core) and the join of each sliced
    # partition's slices ran as Spark tasks, not in the driver
    assert tasks["identity_tasks"] == on_spark["identity_chunks"] == 2 and local["identity_chunks"] == 1
    assert tasks["shuffle_tasks"] == 2 == len(on_spark["shuffle_segments_read"])
    sliced = {task["bucket"][0] for task in units if task["slice"] > 0}
    assert tasks["join_tasks"] == len(sliced) and tasks["unit_tasks"] > on_spark["buckets"]
    for step in ("identity_chunk", "shuffle", "write turns"):
        assert on_spark["step_seconds"][f"spark {step}"] > 0 and step not in on_spark["step_seconds"]
    # and each partition's rollups by the task that wrote its files: a bucket's unit, or its slices' join
    rollups = {f"write {rollup}" for rollup in derived_manifest.ROLLUPS}
    writers = [
        task
        for task in engine.tasks
        if task["kind"] == spark_engine.JOIN_TASK
        or (task["kind"] == spark_engine.UNIT_TASK and task["bucket"][0] not in sliced)
    ]
    assert writers and all(rollups <= set(task["timings"]) for task in writers)
    assert local["step_seconds"]["whole_store_identity"] > 0 and local["step_seconds"]["shuffle"] > 0
    assert leftovers(store) == [], "the units' files and the identity's chunks are gone"


def test_a_sliced_partition_is_published_on_spark_as_soon_as_its_slices_are_written(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readers see the newest partitions first on Spark as in a local build: a partition computed in slices
    is joined and published once its slices are written, not behind every unit still waiting to run."""
    store = hourly_fleet(tmp_path_factory.mktemp("spark-order"))
    # more shuffle batches than cores, as on a large store: every unit is waiting by the time one is done
    monkeypatch.setattr(materialize, "UNITS_PER_PASS", 1)
    engine = spark_engine.SparkBuckets("local[2]")
    built = build(store, bucket_spans=60, engine=engine)
    kinds = [task["kind"] for task in engine.tasks]  # in the order they ended
    assert built["buckets"] > 2 and kinds.count(spark_engine.JOIN_TASK) > 2
    # the newest partition is published while most units are still to run (queued behind them, its join
    # came after 14 of 15)
    before_first_join = kinds[: kinds.index(spark_engine.JOIN_TASK)].count(spark_engine.UNIT_TASK)
    assert before_first_join <= built["units"] // 2, kinds


def test_a_spark_build_that_dies_half_way_is_finished_by_the_next_run(
    spark: SparkSession, store: Path, capsys: Any
) -> None:
    # the executors get far too little memory: their DuckDB fails in the first task, a batch of the shuffle
    starved = spark_engine.SparkBuckets("local[2]", memory_limit="1MB")
    # the message names the task's units and its own error
    with pytest.raises(
        spark_engine.SparkBuildFailed, match=r"^shuffle of units \d+\.\.\d+: \S+(Error|Exception)"
    ):
        build(store, bucket_spans=1_000, engine=starved)
    manifest = derived_manifest.read_manifest(store)
    assert manifest is not None and not manifest.complete, "readers are told the build is not whole"
    with catalog.connect(store) as con:
        assert con.execute("select complete from turnlens_snapshot").fetchall() == [(False,)]
    assert main(["materialize", "--store", str(store), "--master", "local[2]"]) == 2
    assert "--master needs --engine spark" in capsys.readouterr().err

    # the next run (not a refresh: the state is not whole) finishes that build, from the command line, from
    # its first pass: it keeps what was published before the task failed (here only the empty state; the
    # killed driver's test below keeps buckets) and computes the rest
    published = set(manifest.partitions)
    args = [
        "materialize",
        "--store",
        str(store),
        "--engine",
        "spark",
        "--master",
        "local[2]",
        "--margin",
        "0",
    ]
    assert main([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["mode"] == "full" and summary["spark"]["shuffle_tasks"] >= 1
    assert summary["resumed_from"] == manifest.version and "not_resumed" not in summary
    assert 0 < summary["buckets_built"] <= summary["buckets"]
    assert summary["spark"]["unit_tasks"] == summary["units_built"], "a task per unit not yet published"
    finished = derived_manifest.current_snapshot(store)
    assert finished is not None and finished.complete and finished.watermark == manifest.watermark
    assert {part for part, version in finished.partitions.items() if version == manifest.version} == published
    assert rounded(catalogue_rows(store)) == rounded(live_rows(store))
    assert leftovers(store) == [], "the failed build's shuffle, spill and first pass are gone"


def test_a_spark_build_whose_driver_is_killed_is_finished_by_the_next_run(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, capsys: Any
) -> None:
    """The driver (`turnlens materialize --engine spark`, its JVM and Python workers) is killed with -9 once a
    bucket is published: the next run on Spark keeps that bucket, computes only the others, and ends row for
    row where a local build that never stopped does."""
    fleet = hourly_fleet(tmp_path_factory.mktemp("spark-killed"))
    store = copy_store(fleet, fleet.parent / "killed")
    spark_options = ["--engine", "spark", "--master", "local[2]", "--bucket-spans", "120"]
    died = kill_half_way(store, spark_options)
    capsys.readouterr()  # what building the fleet printed

    assert main(["materialize", "--store", str(store), "--margin", "0", "--json", *spark_options]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["resumed_from"] == died.version and "not_resumed" not in summary
    assert 0 < summary["buckets_reused"] and summary["buckets_built"] < summary["buckets"]
    assert summary["spark"]["unit_tasks"] == summary["units_built"]
    assert leftovers(store) == [], "the dead driver's shuffle, its tasks' spill and the first pass are gone"

    untouched = copy_store(fleet, fleet.parent / "untouched")
    build(untouched, bucket_spans=120)
    assert derived_tables(store) == derived_tables(untouched)
