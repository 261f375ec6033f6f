"""The materialised views answer exactly as the plain views do: after a full build (in several buckets), and
after a
refresh that folds in spans received later, including late spans of turns the snapshot already holds."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from derivedstate import catalogue_rows, live_rows
from storebuilder import rounded
from turnlens.collector import compaction, segments
from turnlens.collector.segments import host_tag
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog, commands, materialize, turn_queries
from turnlens.queries import manifest as derived_manifest

from turnlens.cli import main

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"


def one_turn_rows(con: duckdb.DuckDBPyConnection, turns: list[tuple[str, str]]) -> list[list[tuple]]:
    """What the Turn detail page reads of each turn: its timeline and its findings (named queries)."""
    return [
        sorted(catalog.run_named(con, name, {"session": session, "turn": turn}).fetchall(), key=repr)
        for session, turn in turns
        for name in ("turn_timeline_of", "findings_of_turn")
    ]


def turns_with_findings(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """Twelve (session, turn) pairs with a divergence, computed from the spans on `con`."""
    return con.execute(
        "select distinct session_id, turn_id from divergences_of('turn_events') order by all limit 12"
    ).fetchall()


def ingest(store: Path, lines: list[bytes], path: Path) -> None:
    path.write_bytes(b"".join(lines))
    assert main(["ingest", "--store", str(store), "--quiet", str(path)]) == 0


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The simulator's export requests (OTLP JSON lines) for a mix of every scenario: few sessions (80),
    whose labels still hold every scenario's turns and every kind of finding."""
    folder = tmp_path_factory.mktemp("fleet")
    out, labels_file = folder / "fleet.jsonl.gz", folder / "labels.json"
    assert main(["simulate", "--sessions", "80", "--seed", "7", "--quiet"]
                + ["--out", str(out), "--labels", str(labels_file)]) == 0
    labels = json.loads(labels_file.read_text())
    assert {turn["scenario"] for turn in labels["turns"]} == set(labels["scenarios"])
    assert {finding["kind"] for finding in labels["findings"]} == set(labels["kinds"])
    return gzip.decompress(out.read_bytes()).splitlines(keepends=True)


@pytest.mark.slow
def test_a_refresh_folds_late_spans_into_the_turns_they_belong_to(tmp_path: Path, fleet: list[bytes]) -> None:
    store = tmp_path / "store"
    store.mkdir()
    shutil.copy(SAMPLE_DATA / "tool_registry.toml", store / "tool_registry.toml")
    # every other export request now, the rest later: most turns and keys end up with spans on both sides
    ingest(store, fleet[0::2], tmp_path / "first.jsonl")
    first = materialize.materialize(store, segments_glob(store), margin_s=0, bucket_spans=300)
    assert first["mode"] == "full" and first["units"] > 1, "a full build computed in several units"
    assert rounded(catalogue_rows(store)) == rounded(live_rows(store))
    indexed = {str(path) for path in (store / "segments").glob("date=2*/*.parquet")}  # the first half's
    # each table's zero-row file (what a reader binds where no partition has rows) has its rows' columns
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None
    for table in derived_manifest.TABLES:
        files = [Path(file) for file in manifest.table_files(table)]
        assert len(files) > 1, table  # a partition file to compare the zero-row file with
        assert pq.read_metadata(files[-1]).num_rows == 0
        assert pq.read_schema(files[-1]) == pq.read_schema(files[0]), table
    assert not list((store / "derived").glob(".shuffle-v*")), "each unit's input files are removed once used"

    time.sleep(0.01)
    ingest(store, fleet[1::2], tmp_path / "second.jsonl")
    stale = rounded(catalogue_rows(store))
    assert stale != rounded(live_rows(store)), (
        "the second half changes the views; the snapshot shows them as of its watermark"
    )
    with catalog.connect(store) as con:
        [(watermark,)] = con.execute("select watermark_unix_nano from turnlens_snapshot").fetchall()
    assert watermark == first["watermark_unix_nano"]

    # one turn's queries stay live: found from the snapshot's side tables plus the copies received since
    plain = catalog.live_connection(store)
    turns = turns_with_findings(plain)
    with catalog.connect(store) as con:
        assert one_turn_rows(con, turns) == one_turn_rows(plain, turns)
        # and it opens only the segments that can hold the turn: those the index names (the first half's), and
        # the unindexed ones (the second half's). Shown on the first turn with no span in the first half's
        # segments (most turns have spans in both halves)
        for session, turn in turns:
            turn_queries.hold(con, [session], [turn], keys=False)
            [(opened,)] = con.execute("select getvariable('turnlens_turn_files').files").fetchall()
            [(holding,)] = con.execute(
                "select list(distinct filename) from span_copies()"
                " where list_contains(getvariable('turnlens_turn_traces'), trace_id)"
            ).fetchall()
            assert set(holding) <= set(opened), (turn, opened, holding)
            if not set(holding) & indexed:
                break
        else:
            pytest.fail("each of the turns has spans in the first half: no indexed segment to leave unopened")
    assert not set(opened) & indexed, "an indexed segment that cannot hold the turn is not opened"
    plain.close()

    second = materialize.materialize(store, segments_glob(store), margin_s=0)
    assert second["mode"] == "refresh" and second["touched_turns"] > 0
    refreshed = rounded(catalogue_rows(store))
    assert refreshed == rounded(live_rows(store))
    assert len(refreshed["divergences"]) > 0, json.dumps(second)

    third = materialize.materialize(store, segments_glob(store), margin_s=0, full=True)
    assert third["mode"] == "full" and rounded(catalogue_rows(store)) == refreshed


@pytest.mark.slow
def test_a_backlog_is_refreshed_a_share_at_a_time_each_published_and_the_last_equal_to_the_live_views(
    tmp_path: Path, fleet: list[bytes]
) -> None:
    # the rest of the fleet's exports arrive while no materialiser runs, a resource's spans per export
    later = [
        json.dumps({"resourceSpans": [resource]}).encode() + b"\n"
        for line in fleet[1::2]
        for resource in json.loads(line)["resourceSpans"]
    ]
    assert len(later) >= 12

    store = tmp_path / "store"
    store.mkdir()
    shutil.copy(SAMPLE_DATA / "tool_registry.toml", store / "tool_registry.toml")
    ingest(store, fleet[0::2], tmp_path / "first.jsonl")
    assert materialize.materialize(store, segments_glob(store), margin_s=0)["mode"] == "full"
    for n in range(4):  # four exports, received one after another
        time.sleep(0.01)
        ingest(store, later[n::4], tmp_path / f"later-{n}.jsonl")
    with catalog.connect(store) as con:
        [(old_watermark,)] = con.execute("select watermark_unix_nano from turnlens_snapshot").fetchall()
        [(waiting,)] = con.execute(
            "select count(*) from span_copies() where received_unix_nano > $w", {"w": old_watermark}
        ).fetchall()
    share = waiting // 3 + 1
    runs = []
    while not runs or runs[-1]["backlog_copies"]:
        before = time.time_ns()
        run = materialize.materialize(store, segments_glob(store), margin_s=0, refresh_copies_max=share)
        runs.append(run)
        assert run["mode"] == "refresh", run
        with catalog.connect(store) as con:
            [(watermark,)] = con.execute("select watermark_unix_nano from turnlens_snapshot").fetchall()
            [(left,)] = con.execute(
                "select count(*) from span_copies() where received_unix_nano > $w", {"w": watermark}
            ).fetchall()
        assert watermark == run["watermark_unix_nano"], "readers see the state the run published"
        assert left == run["backlog_copies"], "the copies left are exactly those received after its watermark"
        if run["backlog_copies"]:
            assert watermark < before, "a run that left copies covers only what it took"
            if len(runs) == 1:
                taken = rounded(catalogue_rows(store))
                assert taken != rounded(live_rows(store)), "its rows are those of the copies it took"
            else:
                assert watermark > runs[-2]["watermark_unix_nano"], "each run goes on from the last"
        assert len(runs) <= 4, runs
    assert len(runs) >= 3, "the backlog took several runs"
    assert rounded(catalogue_rows(store)) == rounded(live_rows(store))


@pytest.mark.slow
def test_a_copied_store_refreshes_only_what_is_new_and_never_touches_its_originals_files(
    tmp_path: Path, fleet: list[bytes]
) -> None:
    original = tmp_path / "original"
    original.mkdir()
    shutil.copy(SAMPLE_DATA / "tool_registry.toml", original / "tool_registry.toml")
    ingest(original, fleet[0::2], tmp_path / "first.jsonl")
    assert materialize.materialize(original, segments_glob(original), margin_s=0)["mode"] == "full"
    # restored elsewhere from a backup, while the original keeps running: the same spans reach both
    copy = tmp_path / "restored"
    shutil.copytree(original, copy)
    # the copy's manifest still names a file of the original it was about to retire (compaction was busy)
    state = derived_manifest.current_snapshot(original)
    assert state is not None
    kept = next(Path(name) for name in state.files() if "/p=" in name)
    current = copy / "derived" / "current.json"
    current.write_text(json.dumps(json.loads(current.read_text()) | {"retiring": [str(kept)]}))
    time.sleep(0.01)
    for store in (original, copy):
        ingest(store, fleet[1::2], tmp_path / "second.jsonl")

    here = materialize.materialize(original, segments_glob(original), margin_s=0)
    moved = materialize.materialize(copy, segments_glob(copy), margin_s=0, grace_s=0)
    assert moved["mode"] == "refresh" and moved["gone_segments"] == 0, moved
    assert moved["touched_turns"] == here["touched_turns"], "only the turns the new spans touch"
    assert rounded(catalogue_rows(copy)) == rounded(live_rows(copy))
    # its index names its own segments, and nothing of the original went
    manifest = derived_manifest.current_snapshot(copy)
    assert manifest is not None
    indexed = duckdb.sql(
        f"select distinct file from read_parquet({manifest.chunk_files('segments')!r})"
    ).fetchall()
    assert indexed and all(file.startswith(str(copy.resolve()) + "/") for (file,) in indexed), indexed
    compaction.sweep(copy)  # what compaction's next pass deletes
    assert kept.is_file()
    assert rounded(catalogue_rows(original)) == rounded(live_rows(original))


def test_a_snapshot_of_other_inputs_is_not_used(sample_copy: Path) -> None:
    store = sample_copy
    materialize.materialize(store, segments_glob(store), margin_s=0)
    assert derived_manifest.current_snapshot(store) is not None
    with catalog.connect(store) as con:
        assert con.execute("select count(*) from turnlens_snapshot").fetchall() == [(1,)]

    # a tier changes: side_effects computed under the old registry would be wrong, so the views go back
    # to live, and turnlens_snapshot says nothing is built
    registry = store / "tool_registry.toml"
    registry.write_text(registry.read_text() + "\n# edited\n")
    catalog.write_catalog(store, segments_glob(store))
    assert derived_manifest.current_snapshot(store) is None
    with catalog.connect(store) as con:
        assert con.execute("select generation, partitions, complete from turnlens_snapshot").fetchall() == [
            (None, 0, False)
        ]
    assert rounded(catalogue_rows(store)) == rounded(live_rows(store))

    # a snapshot written by another turnlens (its detectors or columns may differ) is not used either
    materialize.materialize(store, segments_glob(store), margin_s=0)
    manifest_file = store / "derived" / "current.json"
    manifest = json.loads(manifest_file.read_text())
    manifest_file.write_text(json.dumps(manifest | {"format": 1}))
    catalog.write_catalog(store, segments_glob(store))
    assert derived_manifest.current_snapshot(store) is None
    assert rounded(catalogue_rows(store)) == rounded(live_rows(store))


def test_a_store_named_by_a_relative_path_is_read_from_any_folder(
    sample_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`turnlens materialize --store ./data` run in one folder, the dashboard or an analyst in another: the
    catalogue names the derived files by their absolute paths, as it names the segments."""
    monkeypatch.chdir(sample_copy.parent)
    assert main(["materialize", "--store", sample_copy.name, "--margin", "0", "--quiet"]) == 0
    assert main(["views", "--store", f"./{sample_copy.name}", "--rebuild"]) == 0
    monkeypatch.chdir(SAMPLE_DATA)
    with catalog.connect(sample_copy) as con:
        [(turns,)] = con.execute("select count(*) from turns").fetchall()
        assert con.execute("select partitions, complete from turnlens_snapshot").fetchall() == [(1, True)]
    assert turns > 0
    assert rounded(catalogue_rows(sample_copy)) == rounded(live_rows(sample_copy))


def test_a_second_materialiser_is_refused_while_one_runs(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with materialize._lock(store), pytest.raises(materialize.MaterializeBusy):
        materialize.materialize(store, segments_glob(store))


def test_the_store_summary_counts_what_the_live_spans_count_without_resolving_them(sample_copy: Path) -> None:
    store = sample_copy
    materialize.materialize(store, segments_glob(store), margin_s=0)
    # a retried export: every span stored twice, counted once
    assert main(["ingest", "--store", str(store), "--quiet", str(SAMPLE_DATA / "sample.jsonl.gz")]) == 0
    materialize.materialize(store, segments_glob(store), margin_s=0)
    with catalog.connect(store) as con:
        [summary] = catalog.run_named(con, "store_summary", {}).fetchall()
        [live] = con.execute(
            "select count(*), count(distinct trace_id), count(distinct session_id), count(distinct turn_id),"
            " make_timestamp(min(wall_ns) // 1000), make_timestamp(max(wall_ns) // 1000) from spans"
        ).fetchall()
        [(copies,)] = con.execute("select count(*) from span_copies()").fetchall()
    assert summary[:5] == live[:5] and copies == 2 * live[0], (summary, live)
    assert summary[5] >= live[5], "the last row seen is no earlier than the last span's start"

def test_a_fresh_store_says_nothing_is_built_yet(sample_copy: Path) -> None:
    # the recorded sample just ingested: nothing was ever materialised on it
    with catalog.connect(sample_copy) as con:
        assert con.execute("select watermark_at, partitions, complete from turnlens_snapshot").fetchall() == [
            (None, 0, False)
        ]


def test_a_refresh_leaves_partitions_nothing_touched_and_retires_the_files_it_replaced(
    sample_copy: Path,
) -> None:
    store = sample_copy
    first = materialize.materialize(store, segments_glob(store), margin_s=0)
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None and manifest.complete and first["partitions"] == len(manifest.partitions) > 0
    named = manifest.files()
    assert all(Path(name).is_file() for name in named)

    # nothing new: the next version names the same partition files, only the watermark moves
    again = materialize.materialize(store, segments_glob(store), margin_s=0)
    assert again["mode"] == "refresh" and again["written_partitions"] == []
    latest = derived_manifest.current_snapshot(store)
    assert (
        latest is not None
        and latest.partitions == manifest.partitions
        and latest.watermark > manifest.watermark
    )
    # every version's manifest stays readable under manifests/ for a reader that pinned it
    assert (
        json.loads((store / "derived" / "manifests" / f"v{manifest.version}.json").read_text())["version"]
        == 1
    )

    # the same spans re-sent: a delta names every turn, no partition file is replaced yet
    assert main(["ingest", "--store", str(store), "--quiet", str(SAMPLE_DATA / "sample.jsonl.gz")]) == 0
    resent = materialize.materialize(store, segments_glob(store), margin_s=0)
    assert resent["deltas"] == 1 and resent["folded_partitions"] == []
    assert derived_manifest.current_snapshot(store).partitions == manifest.partitions  # type: ignore[union-attr]
    # once folded, every partition is rewritten, the replaced files wait in compaction's schedule
    folded = materialize.materialize(store, segments_glob(store), margin_s=0, deltas_max=0)
    assert folded["deltas"] == 0 and folded["folded_partitions"] == sorted(manifest.partitions)
    pending = json.loads((store / "segments" / "_maintenance.json").read_text())["entries"]
    scheduled = {str((store / "segments" / name).resolve()) for entry in pending for name in entry["sources"]}
    replaced = {str(Path(name).resolve()) for name in named if "/p=" in name}
    assert replaced and replaced <= scheduled


def test_a_fold_publishes_the_new_rows_first_and_readers_keep_the_catalogue_they_opened(
    sample_copy: Path,
) -> None:
    """A refresh that folds publishes its delta first (readers see the new rows before partitions are
    rewritten), then the fold; each version by a copy of the catalogue in which only the derived state's files
    and watermark change. A reader that opened the catalogue before keeps reading its version; every view
    keeps its documentation; an edited settings.toml reaches the catalogue with the next refresh."""
    store = sample_copy
    first = materialize.materialize(store, segments_glob(store), margin_s=0)
    pinned = catalog.connect(store)
    held = pinned.execute("select generation from turnlens_snapshot").fetchall()
    assert held == [(first["generation"],)]

    # the same spans re-sent touch every turn; a fold is due at once
    assert main(["ingest", "--store", str(store), "--quiet", str(SAMPLE_DATA / "sample.jsonl.gz")]) == 0
    refreshed = materialize.materialize(store, segments_glob(store), margin_s=0, deltas_max=0)
    assert refreshed["touched_turns"] > 0 and refreshed["deltas"] == 0 and refreshed["folded_partitions"]
    assert refreshed["version"] == first["version"] + 2
    assert 0 < refreshed["fresh_seconds"] <= refreshed["seconds"]
    versions = store / "derived" / "manifests"
    delta_version = json.loads((versions / f"v{first['version'] + 1}.json").read_text())
    assert [delta["version"] for delta in delta_version["deltas"]] == [first["version"] + 1]

    # the old reader still reads the version it opened, whole; new readers read the newest
    assert pinned.execute("select generation from turnlens_snapshot").fetchall() == held
    for view in derived_manifest.VIEWS:
        pinned.execute(f"select count(*) from {view}").fetchall()
    pinned.close()
    assert rounded(catalogue_rows(store)) == rounded(live_rows(store))
    with catalog.connect(store) as con:
        [(generation,)] = con.execute("select generation from turnlens_snapshot").fetchall()
        assert generation == refreshed["generation"]
        undocumented = con.execute(
            "select table_name, column_name from duckdb_columns()"
            " where list_contains($views, table_name) and comment is null",
            {"views": list(derived_manifest.VIEWS)},
        ).fetchall()
        assert undocumented == []
    # the delta published before the fold waits for deletion with the files the fold replaced
    pending = json.loads((store / "segments" / "_maintenance.json").read_text())["entries"]
    scheduled = {str((store / "segments" / name).resolve()) for entry in pending for name in entry["sources"]}
    delta_files = set((store / "derived" / "delta").glob(f"*-v{first['version'] + 1}.parquet"))
    assert delta_files and {str(path.resolve()) for path in delta_files} <= scheduled

    (store / "settings.toml").write_text("slo_cancel_to_ack_ms = 50\n")
    materialize.materialize(store, segments_glob(store), margin_s=0)
    with catalog.connect(store) as con:
        assert con.execute("select slo_cancel_to_ack_ms from settings").fetchall() == [(50,)]


def test_a_loop_behind_the_spans_starts_its_next_run_at_once_but_pauses_for_deleters_now_and_then() -> None:
    # a run shorter than the interval: the next starts one interval after it began, at least half one later
    assert commands.loop_pause(0.3, 1.0, 0.0) == pytest.approx(0.7)
    assert commands.loop_pause(0.9, 1.0, 0.0) == 0.5
    # a longer one: the loop is behind, and every second of pause would be traffic the next run must take
    assert commands.loop_pause(4.0, 1.0, 3.0) == commands.BEHIND_PAUSE_S < 0.1
    # but replaced files are deleted only while no run reads: half an interval every DELETE_CHANCE_S
    assert commands.loop_pause(4.0, 1.0, commands.DELETE_CHANCE_S + 0.1) == 0.5


def test_threads_auto_gives_a_run_the_cores_the_rest_of_the_host_leaves_idle(
    sample_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a quiet 2-core host: both cores; a busy one: one thread; 8 cores with 2.5 of them busy: 6; a collector
    # and its senders keeping 0.6 of a core busy leave the second core most of the time, and 1.3 do not
    assert materialize.idle_threads(0.3, 2) == 2
    assert materialize.idle_threads(6.0, 2) == 1
    assert materialize.idle_threads(2.5, 8) == 6
    assert materialize.idle_threads(0.6, 2) == 2
    assert materialize.idle_threads(1.3, 2) == 1
    # the materialiser's own share of the host's load (its previous runs) does not count against it: 1.9
    # cores busy, 1.8 of them its own
    assert materialize.idle_threads(materialize.others_busy(1.9, 0.0, 1.8, 0.0), 2) == 2
    # nor does a process niced more than it, which waits while it runs: the collector's compaction merging
    # (0.5 of a core at nice 10) beside the collector and its senders (0.5) and the materialiser (0.9 at
    # nice 3, 0.8 of it user time) leaves it both cores; counted as the collector's, it took one
    others = materialize.others_busy(1.9, 1.3, 0.9, 0.8)
    assert others == pytest.approx(0.5) and materialize.idle_threads(others, 2) == 2
    assert materialize.idle_threads(materialize.others_busy(1.9, 0.0, 0.9, 0.0), 2) == 1
    # what the host kept busy is measured: a process spinning on a core for a second shows in it, and in the
    # niced time when it runs niced (the kernel counts both in clock ticks, and the niced time is user time
    # only: a loaded host moved 0.1 s of a half-second spin out of it, hence the margin)
    host = materialize.host_cpu_seconds()
    assert host is not None
    before, niced = host
    spin = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: sum(range(99999))"
    subprocess.run([sys.executable, "-c", spin], check=True, preexec_fn=lambda: os.nice(10))
    host_after = materialize.host_cpu_seconds()
    assert host_after is not None
    after, niced_after = host_after
    assert after - before >= 0.7
    assert niced_after - niced >= 0.7
    # the collector's materialiser runs with `--threads auto` and says what it ran with
    capsys.readouterr()
    run = ["materialize", "--store", str(sample_copy), "--json", "--margin", "0"]
    assert main([*run, "--threads", "auto"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 1 <= summary["threads"] <= (os.cpu_count() or 1)
    with pytest.raises(SystemExit):
        main([*run, "--threads", "two"])


def test_a_spill_folder_takes_the_runs_spill_and_this_hosts_dead_runs_leave_nothing_there(
    sample_copy: Path, tmp_path: Path
) -> None:
    spill_dir = tmp_path / "local-disk"
    spill_dir.mkdir()
    # what a run killed with -9 left there, and the folder of a run still going
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                            text=True, check=True)
    dead = spill_dir / f"turnlens-{host_tag()}-{int(exited.stdout)}"
    dead.mkdir()
    (dead / "duckdb_temp_storage_DEFAULT-0.tmp").write_bytes(b"x" * 1024)
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    alive = spill_dir / f"turnlens-{host_tag()}-{running.pid}"
    alive.mkdir()
    own = spill_dir / f"turnlens-{host_tag()}-{os.getpid()}"
    try:
        con = materialize._connect(sample_copy, segments_glob(sample_copy), 1, "32MB", spill_dir)
        try:
            # more than the memory limit held at once: DuckDB writes the rest to its temporary files
            con.execute("create temp table big as select range, md5(range::varchar) from range(2000000)")
            files = con.execute("select path from duckdb_temporary_files()").fetchall()
            spilled = [Path(path) for (path,) in files]
        finally:
            con.close()
        assert spilled and all(path.parent == own for path in spilled)
        assert not dead.exists() and alive.exists()
        assert not own.exists(), "DuckDB removes its folder when the connection closes"
        # a whole run with the flag: nothing spills into the store
        assert main(["materialize", "--store", str(sample_copy), "--margin", "0", "--full", "--quiet",
                     "--spill-dir", str(spill_dir)]) == 0
        assert not (sample_copy / materialize.DERIVED_DIR / materialize.SPILL_DIR).exists()
        assert sorted(path.name for path in spill_dir.iterdir()) == [alive.name]
    finally:
        running.kill()
        running.wait()


def test_a_refresh_clears_the_temporary_catalogue_a_killed_materialiser_left(
    tmp_path: Path, fleet: list[bytes]
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    ingest(store, fleet[:40], tmp_path / "first.jsonl")
    assert materialize.materialize(store, segments_glob(store), margin_s=0)["mode"] == "full"
    # what a materialiser killed with -9 while it wrote its copy of the catalogue leaves: a process of this
    # host that is gone
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                            text=True, check=True)
    left = store / f".{catalog.CATALOG_FILE}.{host_tag()}.{int(exited.stdout)}.tmp"
    ingest(store, fleet[40:60], tmp_path / "second.jsonl")  # (an import writes a whole catalogue)
    shutil.copyfile(store / catalog.CATALOG_FILE, left)
    assert materialize.materialize(store, segments_glob(store), margin_s=0)["mode"] == "refresh"
    assert not left.exists(), "the next refresh's catalogue copy removes it"


def test_one_turns_queries_read_the_copies_past_the_watermark_and_no_segment_without_one(
    tmp_path: Path, fleet: list[bytes]
) -> None:
    """Beside the derived state, one turn's lookups read the copies received after its watermark: from the
    segments the index does not know and those it says hold such a copy, never from a segment it says holds
    none (at 2,314 segments, opening them all took 1.6 s of the Turn detail page's 2.0 s)."""
    store = tmp_path / "store"
    store.mkdir()
    shutil.copy(SAMPLE_DATA / "tool_registry.toml", store / "tool_registry.toml")
    ingest(store, fleet[0::2], tmp_path / "first.jsonl")
    materialize.materialize(store, segments_glob(store), margin_s=0)
    ingest(store, fleet[1::2], tmp_path / "second.jsonl")
    materialize.materialize(store, segments_glob(store), margin_s=0)  # indexed now, every copy in the state
    old = {str(path) for path in (store / "segments").rglob("*.parquet")}
    # a retried export of the second half, stored after the watermark
    source = max(old, key=lambda path: os.stat(path).st_size)
    table = pq.read_table(source)
    received = table.schema.get_field_index("received_unix_nano")
    now = pa.array([time.time_ns()] * len(table), pa.int64())
    table = table.set_column(received, "received_unix_nano", now)
    retried = Path(source).with_name(f"{host_tag()}-retried-00000001.parquet")
    segments.write_segment(table, retried)
    with catalog.connect(store) as con:
        [(listed,)] = con.execute("select turnlens_new_copy_files()").fetchall()
        [(past,)] = con.execute(
            "select list(distinct filename) from span_copies()"
            " where received_unix_nano > (select watermark_unix_nano from turnlens_snapshot)"
        ).fetchall()
    assert past == [str(retried)] and str(retried) in listed, (past, listed)
    placeholder = str(store / segments.SEGMENTS_DIR / segments.PLACEHOLDER)
    assert not (old - {placeholder}) & set(listed), "segments holding no copy past the watermark are not read"

    plain = catalog.live_connection(store)
    turns = turns_with_findings(plain)
    with catalog.connect(store) as con:
        assert one_turn_rows(con, turns) == one_turn_rows(plain, turns)
    plain.close()
