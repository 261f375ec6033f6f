"""The derived state of a store: the per-turn views as Parquet partitions, refreshed in proportion to what
changed.

The rows of the per-turn views (VIEWS: `turns`, `side_effects`, `divergences`, ...) and three identity side
tables (each trace's turn, its idempotency keys, its links) are partitioned by the time a turn's earliest span
started: by the minute while an hour is recent, by the hour once it is not (a roll-up moves the rows, it does
not
recompute them). Every row carries its turn (session_id, turn_id), so replacing a turn is the same operation
in
every table. A manifest, `DIR/derived/current.json` (a copy under `manifests/v<N>.json` for readers pinning a
version), names the live file of each partition; it is written atomically and durably, and the store's
catalogue
is rewritten to read the files it names (derived/snapshot.sql).

A refresh reads the copies received since the manifest's watermark, finds the turns they touch (through their
traces, links and idempotency keys, derived/fresh.sql), recomputes those turns from the segments the trace ->
segment index names, and writes their rows as a delta: one file per table for all their partitions, plus the
list of the turns it replaces (readers see one version of each turn, derived/current.sql). When the deltas
pile up (and before a roll-up, and after retention) they are folded: each partition they touched gets a new
base file, every other partition keeps its file. Retention dropping a day of segments drops that day's
partitions; the traces they held are recomputed from what remains of them. A full build (the
first one, `--full`, or after the views' SQL or the tool registry changed) goes a bucket of partitions at a
time,
newest first, publishing each bucket as it is done, so readers see the recent turns first and how far the
build
got (turnlens_snapshot.partitions / partitions_total); when its process dies, the next run finishes it from
what its first pass kept (`_resume_build`) rather than starting again. Files a new manifest no longer names
are handed to compaction's deferred deletion (collector/compaction.py, retire), as replaced segments are.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import duckdb
from turnlens.collector import compaction, leases, segments
from turnlens.queries import catalog, identity_index
from turnlens.queries.manifest import (
    CURRENT_FILE,
    DELTA_DIR,
    DERIVED_DIR,
    DERIVED_SQL,
    IDENTITY,
    INDEX_DIR,
    REPLACED,
    ROLLUPS,
    TABLES,
    VIEWS,
    Manifest,
    build_steps,
    current_snapshot,
    fill,
    inputs_fingerprint,
    partition_path,
    read_manifest,
    read_order,
    sql_list,
)
from turnlens.queries.manifest import apply_sql as _apply_sql
from turnlens.queries.manifest import sections as _sections
from turnlens.queries.sqlfiles import sql_identifier, unbound_view

MANIFESTS_DIR = "manifests"
LOCK_FILE = ".lock"
# a refresh folds the deltas into their partitions' base files once more than this many are named, or once
# they replaced more turns than DELTA_TURNS_MAX (and always before a roll-up, and after retention dropped
# segments)
DEFAULT_DELTAS_MAX = 24
DELTA_TURNS_MAX = 200_000
# what each side table is looked up by (one turn's named queries): written sorted on it in small row groups
IDENTITY_ORDER = {"trace_turns": "turn_id", "trace_keys": "idempotency_key", "trace_links": "trace_id"}
LOOKUP_ROW_GROUP = 8192
# How far before its start a run's watermark is. None is needed: a copy received before the watermark whose
# segment became visible only after the run listed the store is in a segment no run has seen, which the next
# takes whole (merges included: compaction.merged_outputs). A margin only makes each run take again the copies
# received in it (a second at 10,000 spans/s was one copy in seven of every run)
DEFAULT_MARGIN_S = 0.0
DEFAULT_BUCKET_SPANS = 250_000  # stored copies per bucket of a full build
# new copies a refresh takes at most: past it (a backlog after an outage, a burst, a materialiser that fell
# behind) it takes the oldest and publishes, the next run goes on from there, each in a bucket's memory
REFRESH_COPIES_MAX = DEFAULT_BUCKET_SPANS
NO_UPTO = 2**63 - 1  # received_unix_nano's bound of a run that takes every new copy
DEFAULT_MEMORY_LIMIT = "1GB"  # DuckDB's limit in a materialiser; past it, it spills to derived/.spill
SPILL_DIR = ".spill"
ROLLUP_AFTER_S = 15 * 60  # an hour whose end is this far behind the watermark is rolled up into one partition
# a full build's first pass, kept until the build is whole (`.build-v<N>/`): the temporary table of each file
PLAN_PREFIX = ".build-v"
# a full build's identity chunks resolved on connections of their own (a Spark task's): each chunk's rows
IDENTITY_PREFIX = ".identity-v"
# written by a run before it writes anything, removed once it has ended well: found by the next run, it says a
# run died (or failed) and may have left partition files no manifest names
RUNNING_FILE = ".running"
# a fold beside the refreshes (FoldBeside): `.folding-<id>` names its process and version from its start until
# it is merged
FOLD_PREFIX = ".folding-"
FOLD_SPILL_DIR = ".fold-spill"  # where its connection spills (its own: DuckDB's spill files are per database)
# the CPU priority of the fold beside a loop's refreshes (its thread's nice value): bulk work that may wait,
# as compaction (collector/maintenance.py), so the refreshes (nice 3 under the collector) get the cores first
FOLD_NICE = 10
# a loop's refresh folds in line, waiting for a fold beside it, once this many deltas are named (or twice its
# `deltas_max`, when that is larger)
DELTAS_HARD_MAX = 2 * DEFAULT_DELTAS_MAX
# stored copies a full build resolves each trace's identity over at once (whole_store_identity), past which it
# does so a chunk of the traces at a time (10M at once peaked at 1.4 GB with a 1 GB limit; 30M ran out)
IDENTITY_CHUNK_COPIES = 4_000_000
# the same on a connection of one thread (a Spark task's, `--threads 1`): DuckDB spills a chunk's resolution
# less well there, and at its 1 GB limit a chunk of 2M copies (10M spans) ran out of memory where one of 1M
# peaked at 1.09 GB; on two threads 4M peaked at 1.14 GB
IDENTITY_CHUNK_COPIES_ONE_THREAD = 1_000_000
# units whose inputs one pass over the store writes (unit_inputs, shuffle): one pass for the 121 units of 30M
# spans ran out of memory (DuckDB buffers each unit's rows), a pass per unit would read the store per unit; 16
# units of 250,000 copies are 4M copies
UNITS_PER_PASS = 16
PLAN_FILE = "plan.json"
PLAN_TABLES = {
    "turnlens_all_trace_turns": "trace_turns",
    "turnlens_all_trace_keys": "trace_keys",
    "turnlens_all_trace_links": "trace_links",
    "turnlens_unit_turns": "unit_turns",
}
INDEX_CHUNKS_MAX = 16  # more chunks of the trace -> segment index than this are merged into one
GRACE_S = compaction.DEFAULT_GRACE_S  # replaced files stay this long for readers whose catalogue names them
# the fresh part's relations a run holds in memory, each computed once from those before it
# (the identity side tables are scanned where needed, not held: holding them would copy the whole store's)
HELD_TOUCHED = (
    "turnlens_new_trace_keys",
    "turnlens_new_trace_links",
    "turnlens_fresh_traces",
    "turnlens_touched_traces",
    "turnlens_own_touched_turn_ids",  # read three times by the next two
    "turnlens_touched_turn_ids",
    "turnlens_fresh_input",
)
HELD_RECOMPUTED = (
    "turnlens_fresh_stored",
    "turnlens_fresh_spans",
    "turnlens_replaced_turns",
    "turnlens_turn_parts",
    "turnlens_fresh_trace_turns",
    "turnlens_fresh_keyed_traces",
    "turnlens_fresh_trace_links",
    "turnlens_fresh_events",
    "turnlens_fresh_side_effects",
    "turnlens_fresh_trace_keys",  # the keyed traces with their turns' key facts (from events and ledger)
    *(f"turnlens_fresh_{view}" for view in VIEWS if view != "side_effects"),
)
# the largest held relations, which only later statements of their phase read: each is dropped once the last
# statement naming it has been held. A 250,000-copy share holds ~0.5 GB of stored copies, as much of resolved
# spans and 1.2 GB of events; all kept to the end, DuckDB spilled past its 1 GB limit (the share cost
# 23.6 CPU s, 20.5 with a 6 GB limit)
RELEASED_AFTER_LAST_READ = ("turnlens_fresh_stored", "turnlens_fresh_spans", "turnlens_fresh_events")
# what a key-fact unit's job holds (write_key_facts): the relations its turns' key facts are computed from
FACTS_HELD = (
    "turnlens_fresh_stored",
    "turnlens_fresh_spans",
    "turnlens_turn_parts",
    "turnlens_fresh_events",
    "turnlens_fresh_side_effects",
)

# the zero-row file of each table this process wrote, by the inputs it was written under (write_templates)
_TEMPLATE_BYTES: dict[tuple[str, str], bytes] = {}
TIMINGS: dict[str, float] = defaultdict(float)  # seconds per step of the last materialize()
# CPU seconds per step (every thread of the process, DuckDB's included, less a fold's beside it: run_cpu): on
# a machine other work shares, what a step costs, where TIMINGS also counts the time it waited for a core
CPU_TIMINGS: dict[str, float] = defaultdict(float)
# a thread's own pair of those (a fold beside the refreshes: FoldBeside): else the step times of the run it is
# beside would count its steps too
_OWN_TIMINGS = threading.local()


class _BesideCpu:
    """The CPU of the threads working beside a run (a fold: FoldBeside), which the run's figures leave out:
    the process's CPU is one, and the refreshes a fold ran beside counted its 16-20 CPU s as their own. Each
    such thread is read through its own CPU clock while it runs, and its total is kept once it leaves."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[int, int] = {}  # thread ident -> its CPU clock
        self._ended = 0.0

    def enter(self) -> None:
        """The calling thread works beside the runs from now on."""
        if hasattr(time, "pthread_getcpuclockid"):  # else (not Unix) its CPU counts to the runs, as before
            with self._lock:
                self._live[threading.get_ident()] = time.pthread_getcpuclockid(threading.get_ident())

    def leave(self) -> None:
        """The calling thread's work beside the runs is over (before it ends: its clock ends with it)."""
        with self._lock:
            if self._live.pop(threading.get_ident(), None) is not None:
                self._ended += time.thread_time()

    def working(self) -> bool:
        """Whether the calling thread is one of them."""
        return threading.get_ident() in self._live

    def seconds(self) -> float:
        """The CPU seconds every such thread has used, since the process started."""
        with self._lock:
            return self._ended + sum(time.clock_gettime(clock) for clock in self._live.values())


_BESIDE_CPU = _BesideCpu()


def run_cpu() -> float:
    """A CPU clock for the work of the calling thread's run: on a thread beside the runs, the thread's own (a
    fold's one-thread DuckDB connection runs on it); else the process's, less that of the threads beside."""
    if _BESIDE_CPU.working():
        return time.thread_time()
    return time.process_time() - _BESIDE_CPU.seconds()


_PHASE = re.compile(r"^-- phase: (\w+)$", re.MULTILINE)
_TEMP_VIEW = re.compile(r"create or replace temp view (\w+) as")


def typed_nulls(columns: list[tuple[str, str]]) -> str:
    """A query of no row with these (name, DuckDB type) columns: what a zero-row file is written from."""
    nulls = ", ".join(f"null::{type_} as {sql_identifier(name)}" for name, type_ in columns)
    return f"select {nulls} limit 0"


class BuildEngine(Protocol):
    """What runs a full build's parallel work: the identity's chunks on a large store, the shuffle's passes
    and the units' jobs. LocalEngine runs them one after another on the run's own connection;
    queries/spark_engine.py's SparkBuckets as Spark tasks."""

    def identity_chunk_copies(self, run: _Run) -> int:
        """The stored copies a chunk of the whole store's identity may resolve at once where it runs (past
        them, one pass over the store would be a chunk too large)."""
        ...

    def identity_chunks(self, run: _Run, chunks: IdentityChunks) -> None:
        """Adds the identity of every chunk's traces to turnlens_all_trace_turns on the run's connection, and
        their keys and links to turnlens_all_trace_keys and turnlens_all_trace_links."""
        ...

    def units(
        self, run: _Run, values: dict[str, str], units: list[tuple[list[str], range]], shuffle: Shuffle
    ) -> Iterator[list[str]]:
        """Given the fresh part's constants, the buckets newest first (each with its unit numbers: one, or one
        per slice) and the shuffle (where each unit's input files go): writes each unit's inputs
        (shuffle_pass), the key facts of the shuffle's key-fact units (write_key_facts) before any unit's job
        reads them, then each bucket's partition files (their folders added to run.written_dirs), and yields
        the bucket when they are all written; the build publishes it then."""
        ...

    def close(self) -> None:
        """The materialiser's run is over: releases what the engine holds for it (a Spark session)."""
        ...


class MaterializeBusy(Exception):
    """Another process is writing the derived state of this store."""


def _lock(store_dir: Path) -> AbstractContextManager[None]:
    """The store's derived-state lock: one materialiser at a time, refused at once when another holds it."""
    folder = store_dir / DERIVED_DIR
    folder.mkdir(parents=True, exist_ok=True)
    busy = MaterializeBusy(f"another process is materialising {store_dir}")
    return compaction.exclusive_lock(folder / LOCK_FILE, 0.0, busy)


class _Run:
    """One materialiser run: its connection, the previous manifest and the files it writes."""

    def __init__(
        self,
        store_dir: Path,
        segments_glob: str,
        con: duckdb.DuckDBPyConnection,
        watermark: int,
        version: int,
        margin_s: float = 0.0,
    ) -> None:
        self.store_dir = store_dir
        self.margin_s = margin_s  # the margin the run leaves unread, which the manifests it publishes record
        self.folder = store_dir / DERIVED_DIR
        self.segments_glob = segments_glob
        self.con = con
        self.steps = build_steps()
        self.version = version
        self.move_watermark(watermark)
        self.placeholder = str(Path(segments_glob).parent.parent / segments.PLACEHOLDER)
        # the segments folder the previous index names files in, when the store was copied or moved since
        # (follow_index): None while it names this store's own
        self.indexed_in: str | None = None
        self.written_dirs: set[Path] = set()
        self.held_rows: dict[str, int] = {}  # the rows of each relation the run held (fresh_phase)
        self.published: list[Manifest] = []  # the versions this run published, oldest first
        self.published_at: list[float] = []  # when (time.perf_counter()) each was

    def here(self, file: str) -> str:
        """A segment path as the previous index names it, as this store names it (follow_index)."""
        if self.indexed_in is not None and file.startswith(self.indexed_in + "/"):
            return str(Path(self.segments_glob).parent.parent) + file[len(self.indexed_in) :]
        return file

    def move_watermark(self, watermark: int) -> None:
        """The received time the run's state covers (a refresh with a backlog moves it back)."""
        self.watermark = watermark
        # the newest hour already rolled up: a turn that started before it belongs to an hour partition
        self.cutoff = _hour_floor(watermark - int(ROLLUP_AFTER_S * 1e9))

    def step(
        self,
        name: str,
        values: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        timed_as: str | None = None,
    ) -> Any:
        """Runs one step's statements, its time counted to `timed_as` (by default its name); returns the last
        one's cursor."""
        with _timed(timed_as or name):
            result = None
            for statement in catalog.split_statements(fill(self.steps[name], values or {})):
                result = self.con.execute(statement, catalog._params_of(statement, params or {}))
        return result

    def fresh_phase(self, phase: str, values: Mapping[str, str], held: tuple[str, ...] = ()) -> None:
        """Creates one phase of derived/fresh.sql's views, unbound until read; those named in `held` are
        computed at once into temporary tables instead, in the file's order (each binds once, and the next
        ones read it from memory)."""
        started, cpu = time.perf_counter(), run_cpu()
        body = _sections((DERIVED_SQL / "fresh.sql").read_text(), _PHASE)[phase]
        if "input_files" in values and "input_copies" not in values:  # a refresh reads the segments
            values = {**values, "input_copies": f"span_copies_in({values['input_files']})"}
        statements = catalog.split_statements(fill(body, values))
        last_read = _last_reads(statements, held)
        for statement in statements:
            view = _TEMP_VIEW.search(statement)
            if view is not None and view[1] in held:
                holding, holding_cpu = time.perf_counter(), run_cpu()
                created = statement.replace(view[0], f"create or replace temp table {view[1]} as", 1)
                [(rows,)] = self.con.execute(created).fetchall()  # CREATE TABLE AS answers its row count
                self.held_rows[view[1]] = int(rows)
                for name in last_read.get(view[1], ()):
                    self.con.execute(f"drop table {name}")
                _add_time(f"hold {view[1]}", time.perf_counter() - holding, run_cpu() - holding_cpu)
                started += time.perf_counter() - holding
                cpu += run_cpu() - holding_cpu
            elif view is not None:
                # bound where a hold or a copy reads it: binding it here as well, each view again through all
                # the views it reads, took 2.1 s of every unit of a full build on a small store
                self.con.execute(unbound_view(statement))
            else:
                self.con.execute(statement)
        _add_time(f"define {phase}", time.perf_counter() - started, run_cpu() - cpu)

    def hold(self, names: tuple[str, ...]) -> None:
        """Computes relations of the fresh part once each, in order, and reads them from memory afterwards."""
        for name in names:
            self.step("hold", {"name": name}, timed_as=f"hold {name}")

    def copy(self, select: str, target: Path, order_by: str | None = None, step: str | None = None) -> None:
        """Writes a query's rows to one Parquet file (sorted, in small row groups, when `order_by` names the
        column a lookup filters on), fsynced; its directory is fsynced before the manifest names it. Its time
        counts to `step` (by default, writing the table its folder holds)."""
        query = select.rstrip().rstrip(";")
        if order_by:
            query = f"select * from ({query}) order by {order_by}"
        row_group = LOOKUP_ROW_GROUP if order_by else 122_880
        with _timed(step or f"write {target.parent.parent.name}"):
            target.parent.mkdir(parents=True, exist_ok=True)
            self.con.execute(
                f"copy ({query}) to {catalog.sql_string(str(target))}"
                f" (format parquet, compression zstd, compression_level 1, row_group_size {row_group})"
            )
            segments.fsync_file(target)
        self.written_dirs.add(target.parent)

    def present_segments(self) -> list[str]:
        with _timed("list segments"):
            return [
                file
                for (file,) in self.con.execute(
                    "select file from glob($glob)", {"glob": self.segments_glob}
                ).fetchall()
            ]

    def stored_copies(self) -> int:
        """The copies the store's segments hold, from their footers."""
        query = "select coalesce(sum(num_rows), 0) from parquet_file_metadata($glob)"
        with _timed("stored copies"):
            [(rows,)] = self.con.execute(query, {"glob": self.segments_glob}).fetchall()
        return int(rows)

    def write_templates(self, manifest: Manifest) -> None:
        """The zero-row file of every table (its columns, whatever partitions exist) the manifest names: nulls
        of the types its query binds to. Planning each table's whole query to write no row took 5.6 s of a
        small store's build, binding it 1.1 s. The bytes depend on the views' inputs alone: a process writes
        the ones it wrote before again."""
        for table in TABLES:
            target = manifest.template_file(table)
            written = _TEMPLATE_BYTES.get((manifest.inputs_sha256, table))
            if written is None:
                step = self.steps.get(f"template_rows_{table}", self.steps["template_rows"])
                query = fill(step, {"table": table}).rstrip().rstrip(";")
                with _timed(f"write {target.parent.parent.name}"):
                    columns = self.con.execute(f"describe {query}").fetchall()
                self.copy(typed_nulls([(name, type_) for name, type_, *_ in columns]), target)
                _TEMPLATE_BYTES[(manifest.inputs_sha256, table)] = target.read_bytes()
                continue
            with _timed(f"write {target.parent.parent.name}"):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(written)
                segments.fsync_file(target)
            self.written_dirs.add(target.parent)

    def write_chunk(self, files: list[str]) -> None:
        """A chunk of the trace -> segment index for `files` (the placeholder keeps the list non-empty), and
        its run."""
        listed = {"files": sql_list(read_order(files, self.placeholder))}
        self.copy(
            self.steps["index_traces"].replace("{{files}}", listed["files"]),
            self._chunk("traces"),
            "trace_id",
        )
        self.copy(self.steps["index_segments"].replace("{{files}}", listed["files"]), self._chunk("segments"))
        self.write_chunk_run(self.version)

    def write_chunk_run(self, chunk: int) -> list[str]:
        """The run of an index chunk (identity_index.write_chunk_run); returns its segments, sorted."""
        rows = self.step("indexed_segments", {"files": sql_list([str(self._chunk("segments", chunk))])})
        files = sorted(file for file, _ in rows.fetchall())
        target = self._chunk("traces", chunk).with_suffix(".npy")
        with _timed("index traces"):
            identity_index.write_chunk_run(self.con, self._chunk("traces", chunk), files, target)
        self.written_dirs.add(target.parent)
        return files

    def _chunk(self, kind: str, version: int | None = None) -> Path:
        return self.folder / INDEX_DIR / f"{kind}-v{self.version if version is None else version}.parquet"

    def partition_file(self, table: str, part: str) -> Path:
        """A partition's file of a table (or rollup) in this run's version."""
        return partition_path(self.folder, table, part, self.version)

    def slice_file(self, target: Path, slice_: int) -> Path:
        """Where one slice of a partition's file is written before the slices are joined."""
        return target.with_name(f".{target.stem}.slice-{slice_}.parquet")

    def write_partition(self, table: str, part: str, slice_: int | None = None) -> None:
        """A partition's file (or one slice of it) from the rows the full build recomputed for it."""
        select = fill(self.steps["new_partition_rows"], {"table": table, "part": catalog.sql_string(part)})
        target = self.partition_file(table, part)
        if slice_ is not None:
            target = self.slice_file(target, slice_)
        self.copy(select, target, IDENTITY_ORDER.get(table))

    def write_delta(self) -> list[str]:
        """One file per table with the recomputed turns' rows, whatever their partitions (a table without
        such rows gets none), and the list of the turns they replace; returns the tables written."""
        tables = []
        for table in TABLES:
            select = fill(self.steps["delta_rows"], {"table": table}).rstrip().rstrip(";")
            [(rows,)] = self.con.execute(f"select count(*) from ({select})").fetchall()
            if rows:
                target = self.folder / DELTA_DIR / f"{table}-v{self.version}.parquet"
                self.copy(select, target, IDENTITY_ORDER.get(table))
                tables.append(table)
        self.copy(
            self.steps["delta_replaced"],
            self.folder / DELTA_DIR / f"{REPLACED}-v{self.version}.parquet",
            "turn_id",
        )
        return tables

    def write_fold(self, table: str, part: str, previous: Path | None) -> None:
        """A partition's base file from its previous one and the rows in force of the deltas' turns."""
        values = {"table": table, "part": catalog.sql_string(part)}
        if previous is None:
            select = fill(self.steps["fold_new_rows"], values)
        else:
            select = fill(self.steps["fold_rows"], values | {"previous": catalog.sql_string(str(previous))})
        self.copy(select, self.partition_file(table, part), IDENTITY_ORDER.get(table))

    def count(self, files: list[str]) -> int:
        [(rows,)] = self.con.execute(fill(self.steps["count_rows"], {"files": sql_list(files)})).fetchall()
        return int(rows)


def _hour_floor(ns: int) -> int:
    hour = 3600 * 1_000_000_000
    return ns - ns % hour


def _last_reads(statements: list[str], held: tuple[str, ...]) -> dict[str, list[str]]:
    """Which RELEASED_AFTER_LAST_READ relations held in this phase each held relation is the last reader of:
    the one the phase's last statement naming it creates (none when that statement creates a view, read later,
    or the relation itself, read by no later statement of the phase)."""
    released: dict[str, list[str]] = defaultdict(list)
    for name in (name for name in RELEASED_AFTER_LAST_READ if name in held):
        naming = re.compile(rf"\b{name}\b")
        readers = [statement for statement in statements if naming.search(statement)]
        last = _TEMP_VIEW.search(readers[-1]) if readers else None
        if last is not None and last[1] in held and last[1] != name:
            released[last[1]].append(name)
    return released


def spill_folder(store_dir: Path, spill_dir: Path | None) -> Path:
    """Where this process's DuckDB spills past its memory limit: its own folder, `turnlens-<host>-<pid>`, in
    `spill_dir` (a local disk, for a store on a network filesystem or in a bucket, where each spilled byte
    would cross the network twice), else in the store's derived/.spill (which the next run removes whole).
    Its own, so that the tasks of a Spark build on one host keep apart. DuckDB removes it when the connection
    closes; this host's dead processes' folders go here."""
    base = store_dir / DERIVED_DIR / SPILL_DIR if spill_dir is None else spill_dir
    base.mkdir(parents=True, exist_ok=True)
    host = segments.host_tag()
    for left in base.glob(f"turnlens-{host}-*"):
        pid = left.name.rsplit("-", 1)[-1]
        if left.name == f"turnlens-{host}-{pid}" and pid.isdigit() and not segments.pid_alive(int(pid)):
            shutil.rmtree(left, ignore_errors=True)
    return base / f"turnlens-{host}-{os.getpid()}"


def _connect(
    store_dir: Path,
    segments_glob: str,
    threads: int | None,
    memory_limit: str | None,
    spill_dir: Path | None = None,
) -> Any:
    """The materialiser's connection: the store's catalogue opened read-only (its views and macros are bound
    already; rebinding them all costs seconds), everything the run creates temporary; DuckDB spills to
    spill_folder(store_dir, spill_dir)."""
    if not (store_dir / catalog.CATALOG_FILE).exists():
        catalog.write_catalog(store_dir, segments_glob)
    con = duckdb.connect(str(store_dir / catalog.CATALOG_FILE), read_only=True)
    # a catalogue of another folder or another turnlens lacks this run's macros or reads other files
    if catalog.follow_move(store_dir, con):
        con.close()
        con = duckdb.connect(str(store_dir / catalog.CATALOG_FILE), read_only=True)
    _configure(con, threads, spill_folder(store_dir, spill_dir), memory_limit)
    identity = (
        (DERIVED_SQL / "identity.sql")
        .read_text()
        .replace("create or replace macro", "create or replace temp macro")
    )
    for statement in catalog.split_statements(identity):
        con.execute(statement)
    return con


def _configure(con: Any, threads: int | None, spill: Path, memory_limit: str | None) -> None:
    """A materialiser connection's settings: its threads, where it spills and past which memory."""
    if threads:
        con.execute(f"set threads = {int(threads)}")  # SET binds no parameters
    con.execute(f"set temp_directory = {catalog.sql_string(str(spill))}")
    con.execute(f"set memory_limit = {catalog.sql_string(memory_limit or DEFAULT_MEMORY_LIMIT)}")
    con.execute("set preserve_insertion_order = false")
    con.execute("set parquet_metadata_cache = true")  # every view binds span_copies() and reads its footers


def materialize(
    store_dir: Path,
    segments_glob: str,
    *,
    full: bool = False,
    margin_s: float = DEFAULT_MARGIN_S,
    bucket_spans: int = DEFAULT_BUCKET_SPANS,
    threads: int | None = None,
    memory_limit: str | None = None,
    spill_dir: Path | None = None,
    now_ns: int | None = None,
    grace_s: float = GRACE_S,
    deltas_max: int = DEFAULT_DELTAS_MAX,
    engine: BuildEngine | None = None,
    bootstrap: bool = False,
    refresh_copies_max: int = REFRESH_COPIES_MAX,
    beside: FoldBeside | None = None,
) -> dict[str, Any]:
    """Brings the store's derived state up to now minus `margin_s` and rewrites the catalogue to read it.

    The run reads under a reader lease (no segment it listed is deleted under it); the files it replaces are
    retired for deletion after `grace_s`, like a replaced segment. A refresh writes the recomputed turns as a
    delta and folds the deltas into the partitions' files once more than `deltas_max` are named (0: at once).
    DuckDB spills past `memory_limit` into the store's derived/.spill, or into `spill_dir` (spill_folder).

    With `bootstrap` (the collector's loop), a store without usable derived state that holds no more than one
    bucket of copies gets an empty state covering nothing, and the run goes on as a refresh that takes every
    copy as new: publishing once, without the full build's passes over the store (`_bootstrap`). With
    `beside` (the same loop's), a refresh folds the deltas on a thread of its own while the next refreshes go
    on, and one of them merges the fold (FoldBeside); before a roll-up, after retention, and past
    DELTAS_HARD_MAX deltas it still folds in line.
    A full build a run that died left incomplete is finished (its published buckets kept) when its inputs
    still hold (`_resume_refusal`; the summary's `not_resumed` says why not), even with `full`.
    A refresh when the current manifest is whole and written under the store's inputs, else a full build,
    whose chunks and units `engine` computes (LocalEngine, on this connection, by default;
    queries/spark_engine.py's on a Spark cluster). A refresh always runs here: it reads what changed, not the
    store.
    Returns what it did: mode (full / refresh), version, watermark, partitions written, rows, seconds.
    Raises MaterializeBusy when another process holds the store's derived-state lock.
    """
    started, cpu = time.perf_counter(), run_cpu()
    store_dir = store_dir.resolve()  # the catalogue names its files absolute: readers open it from any folder
    TIMINGS.clear()
    CPU_TIMINGS.clear()
    watermark = (now_ns if now_ns is not None else time.time_ns()) - int(margin_s * 1e9)
    with _lock(store_dir), leases.reading(store_dir, long=True):
        with _timed("read manifest"):
            found = read_manifest(store_dir)
            previous = current_snapshot(store_dir)
        with _timed("remove unpublished"):
            folding = _remove_unpublished(store_dir, found)
            running = store_dir / DERIVED_DIR / RUNNING_FILE
            segments.ensure_dir(running.parent)
            running.write_text(f"{os.getpid()}\n")
        version = max([found.version if found else 0, *folding]) + 1
        with _timed("connect"):
            con = _connect(store_dir, segments_glob, threads, memory_limit, spill_dir)
        # the folds beside another loop's refreshes (of another process, or on another host)
        elsewhere = folding - ({beside.version} if beside is not None and beside.base is not None else set())
        try:
            run = _Run(store_dir, segments_glob, con, watermark, version, margin_s)
            refused = None if found is None or found.complete else _resume_refusal(run, found)
            if found is not None and not found.complete and refused is None:
                # the build's watermark
                run = _Run(store_dir, segments_glob, con, found.watermark, version, margin_s)
                manifest, summary = _resume_build(run, found, engine or LocalEngine())
            elif previous is not None and previous.complete and not full:
                manifest, summary = _refresh(run, previous, deltas_max, refresh_copies_max, beside, elsewhere)
            elif bootstrap and not full and run.stored_copies() <= bucket_spans:
                empty = _bootstrap(run, found)
                run = _Run(store_dir, segments_glob, con, watermark, version + 1, margin_s)
                manifest, summary = _refresh(run, empty, deltas_max, refresh_copies_max, beside, elsewhere)
                summary["mode"] = "bootstrap"
            else:
                manifest, summary = _full_build(run, found, bucket_spans, engine or LocalEngine())
            if found is not None and refused is not None:  # an incomplete build: say why it was not finished
                summary["not_resumed"] = {"version": found.version, "reason": refused}
        finally:
            con.close()
            if engine is not None:
                engine.close()
        with _timed("retire"):
            _retire(store_dir, manifest, found, run.published[:-1], grace_s)
            _remove_old_format(store_dir, grace_s)
        running.unlink(missing_ok=True)
    if summary["mode"] == "refresh":
        # when its rows were readers': before a fold and a roll-up the same run goes on with
        summary["fresh_seconds"] = round(run.published_at[0] - started, 3)
    summary |= {
        "generation": manifest.generation,
        "version": manifest.version,
        "watermark_unix_nano": manifest.watermark,
        "partitions": len(manifest.partitions),
        "threads": threads,
        "seconds": round(time.perf_counter() - started, 3),
        "cpu_seconds": round(run_cpu() - cpu, 3),
        "peak_rss_mb": peak_rss_mb(),
        "step_seconds": {name: round(seconds, 3) for name, seconds in TIMINGS.items()},
        "step_cpu_seconds": {name: round(seconds, 3) for name, seconds in CPU_TIMINGS.items()},
    }
    return summary


def idle_threads(others: float, cores: int) -> int:
    """DuckDB threads for a run on a shared host (`--threads auto`): one per core the rest of the host leaves
    at least a quarter idle, at least one. `others`: the cores the rest of the host kept busy lately at a
    priority the run does not outrank (others_busy; else the 1-minute load average less this process's
    share). The materialiser runs at a lower CPU priority than the collector, so a second thread takes what
    the collector leaves; on a host busy with other work it would mostly wait for a core, and splitting the
    work costs CPU of its own."""
    return max(1, min(cores, int(cores - others + 0.75)))


def lower_thread_priority(nice: int) -> None:
    """Runs the calling thread at CPU priority `nice` or lower. Linux keeps a nice value per thread
    (setpriority on the thread's id); elsewhere, or where it is refused, the thread runs as it did."""
    try:
        tid = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, tid) < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except (AttributeError, OSError):
        pass


def host_cpu_seconds() -> tuple[float, float] | None:
    """CPU seconds the whole host has spent since it booted, from /proc/stat's first line: busy (every core,
    every process, less idle and I/O wait), and of that the user time of processes at a lower CPU priority
    than the default (nice above 0, the `nice` column: the collector's compaction at nice 10, and the
    materialiser itself at nice 3 under the collector). None where /proc is not available."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(field) for field in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(ticks[:8]) - idle) / tick, ticks[1] / tick


def others_busy(host_busy: float, host_niced: float, own_busy: float, own_niced: float) -> float:
    """The cores the rest of the host kept busy at a CPU priority a run does not outrank: `host_busy` less
    this process's own `own_busy`, less what processes of a lower priority than the default kept busy
    (`host_niced`, of which `own_niced` is this process's own). A process niced more than this one mostly
    waits while it runs: the collector's compaction (nice 10) gets about a fifth of what the materialiser
    (nice 3) gets of a core they share, so a merge of five minutes of segments does not take a thread from
    the refreshes. A process niced less than this one but above 0 counts as lower too: /proc/stat does not
    tell them apart."""
    return max(0.0, host_busy - own_busy - max(0.0, host_niced - own_niced))


def peak_rss_mb() -> float | None:
    """This process's peak resident memory in MB (DuckDB's native memory included), from the kernel's
    high-water mark of its own address space (`VmHWM`): unlike `ru_maxrss`, it does not count the memory of
    the process that started it (exec carries the parent's peak into the child's `ru_maxrss`). None where
    /proc is not available."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


@contextmanager
def _timed(name: str) -> Iterator[None]:
    """Adds the block's wall and CPU seconds to a step of TIMINGS and CPU_TIMINGS."""
    started, cpu = time.perf_counter(), run_cpu()
    try:
        yield
    finally:
        _add_time(name, time.perf_counter() - started, run_cpu() - cpu)


def _add_time(name: str, wall: float, cpu: float) -> None:
    """Counts wall and CPU seconds to a step of TIMINGS and CPU_TIMINGS, or of this thread's own pair."""
    wall_times, cpu_times = getattr(_OWN_TIMINGS, "pair", (TIMINGS, CPU_TIMINGS))
    wall_times[name] += wall
    cpu_times[name] += cpu


def publish(run: _Run, manifest: Manifest) -> Manifest:
    """Makes a manifest current, durably: a whole manifest's identity index extended to the partitions it
    does not cover yet (identity_index.cover), its files' directories fsynced, the manifest written to a
    temporary name, fsynced and renamed (a versioned copy first, for readers pinning a version), then the
    catalogue rewritten to read it. Returns the manifest published."""
    manifest = replace(manifest, margin_s=run.margin_s)
    if manifest.complete:
        with _timed("index identity"):
            manifest, written = identity_index.cover(run.con, manifest)
        run.written_dirs |= {path.parent for path in written}
    _write_rollups(run, manifest)
    with _timed("publish manifest"):
        for directory in sorted(run.written_dirs | {d.parent for d in run.written_dirs}):
            segments.fsync_dir(directory)  # the new files' entries, and the entries of new partition folders
        run.written_dirs.clear()
        body = json.dumps(manifest.to_json(), indent=1) + "\n"
        versions = run.folder / MANIFESTS_DIR
        segments.ensure_dir(versions)
        for target in (versions / f"v{manifest.version}.json", run.folder / CURRENT_FILE):
            tmp = segments.tmp_path(target)
            tmp.write_text(body)
            segments.publish(tmp, target)
    with _timed("write catalogue"):
        catalog.update_derived(run.store_dir, run.segments_glob)
    run.published.append(manifest)
    run.published_at.append(time.perf_counter())
    return manifest


def _write_rollups(run: _Run, manifest: Manifest) -> None:
    """Writes the rollups (manifest.ROLLUPS) of every partition the manifest names that has none yet: the
    partitions this run wrote, however it wrote them (a fold; a roll-up; a full build's bucket, whose unit or
    join usually wrote them already: write_partition_rollups), and of the zero-row files. A rollup takes its
    partition's version, so a partition written again gets a new one and the old one is retired with its base
    files."""
    for rollup, (tables, _) in ROLLUPS.items():
        pairs: list[tuple[list[Path], Path]] = [
            ([manifest.template_file(table) for table in tables], manifest.template_file(rollup))
        ]
        for part in manifest.partitions:
            sources = [manifest.partition_file(table, part) for table in tables]
            pairs.append((sources, manifest.partition_file(rollup, part)))
        for sources, target in pairs:
            if not target.exists():
                _write_rollup(run, rollup, sources, target)


def write_partition_rollups(run: _Run, part: str) -> None:
    """The rollups of a partition a full build just wrote in this run's version, on the connection that wrote
    it (a unit's, or a join's of slices: a Spark task's, where the work divides across executors, not the
    driver's at publish)."""
    for rollup, (tables, _) in ROLLUPS.items():
        sources = [run.partition_file(table, part) for table in tables]
        _write_rollup(run, rollup, sources, run.partition_file(rollup, part))


def _write_rollup(run: _Run, rollup: str, sources: list[Path], target: Path) -> None:
    """One rollup file: its macro over the files of the tables it sums."""
    tables, macro = ROLLUPS[rollup]
    for table, source in zip(tables, sources, strict=True):
        values = {"table": table, "file": catalog.sql_string(str(source))}
        run.con.execute(fill(run.steps["rollup_input"], values))
    arguments = ", ".join(catalog.sql_string(f"turnlens_rollup_{table}") for table in tables)
    select = fill(run.steps["rollup_rows"], {"macro": macro, "arguments": arguments})
    run.copy(select, target, step=f"write {rollup}")


def _remove_unpublished(store_dir: Path, found: Manifest | None) -> set[int]:
    """Removes what a run that died wrote after the current version: no manifest names it, no reader sees
    it. Called under the derived-state lock, so no other materialiser is writing: every temporary file in the
    folder is a dead run's (DuckDB's spill files, a full build's per-unit inputs), and so is a versioned
    manifest newer than the current one (it died between the two renames of its publish), which the next
    run's version would otherwise reuse. A full build publishes one version again and again, a bucket at a
    time: its partition files of that version that the manifest does not name are its unpublished buckets.
    The first pass of an incomplete build stays: the next run resumes from it.

    The partitions' folders (11 tables x every partition: 720 partitions for 30 days of hours) are swept only
    when a run may have left files there: the last run did not end well (RUNNING_FILE is there), there is no
    manifest, or a full build is not finished. A run that ended well left none, and listing every folder at
    each refresh cost 0.08 s at 150 partitions. (A run that died before RUNNING_FILE existed, under an older
    turnlens, may leave files that are then never swept; no manifest names them, so no reader sees them.)

    A fold beside the refreshes (FoldBeside) that is under way keeps its files; the versions of those are
    returned, and a run takes a later one. Those of one whose process died are removed."""
    newest = found.version if found else 0
    folder = store_dir / DERIVED_DIR
    folding = _remove_dead_folds(folder, found)
    died = (folder / RUNNING_FILE).exists() or found is None or not found.complete
    resumable = f"{PLAN_PREFIX}{found.plan}" if found is not None and found.plan is not None else None
    for plan in folder.glob(f"{PLAN_PREFIX}*"):
        if plan.name != resumable:
            shutil.rmtree(plan, ignore_errors=True)
    shutil.rmtree(folder / SPILL_DIR, ignore_errors=True)  # DuckDB's spill files, the run's and its tasks'
    for path in folder.glob(f"{MANIFESTS_DIR}/v*.json"):
        if path.stem[1:].isdigit() and int(path.stem[1:]) > newest:
            path.unlink(missing_ok=True)
    temporary = (".*.tmp", f"{MANIFESTS_DIR}/.*.tmp", f"{INDEX_DIR}/.*.merge", f"{INDEX_DIR}/.*.tmp")
    for pattern in (*temporary, "*/*/.v*.parquet.rollup") if died else temporary:
        for path in folder.glob(pattern):
            path.unlink(missing_ok=True)
    if died:
        _remove_unpublished_partitions(folder, found, folding)
    for path in [
        *folder.glob(f"{INDEX_DIR}/*-v*.parquet"),
        *folder.glob(f"{INDEX_DIR}/*-v*.npy"),
        *folder.glob("*/empty-v*.parquet"),
        *folder.glob(f"{DELTA_DIR}/*-v*.parquet"),
    ]:
        if int(path.stem.rsplit("-v", 1)[1]) > newest:
            path.unlink(missing_ok=True)
    # a full build's per-unit inputs and identity chunks: only that build reads them
    for shuffle in [*folder.glob(".shuffle-v*"), *folder.glob(f"{IDENTITY_PREFIX}*")]:
        shutil.rmtree(shuffle, ignore_errors=True)
    return folding


def _remove_unpublished_partitions(folder: Path, found: Manifest | None, folding: set[int]) -> None:
    """Removes the partition files no manifest names that a run which died wrote: a later version's, an
    unpublished bucket's of the current one, a bucket's slices before their join (not the files of a fold
    under way, whose versions are `folding`)."""
    newest = found.version if found else 0
    named = found.files() if found else set()
    for path in folder.glob("*/*/v*.parquet"):  # a later version's partition files, an unpublished bucket's
        version = int(path.stem[1:])
        if version in folding:
            continue
        if version > newest or (version == newest and str(path) not in named):
            path.unlink(missing_ok=True)
    for path in folder.glob("*/*/.v*.slice-*.parquet"):  # never named: a bucket's slices, before their join
        if int(path.name[2:].split(".", 1)[0]) >= newest:
            path.unlink(missing_ok=True)


def _remove_old_format(store_dir: Path, grace_s: float) -> None:
    """Retires the snapshot folders an earlier turnlens wrote (`gen-<watermark>/`, and the temporary folders
    of runs that died): no manifest names them, and compaction's sweep removes them once no reader can."""
    derived = store_dir / DERIVED_DIR
    folders = [folder for folder in [*derived.glob("gen-*"), *derived.glob(".gen-*")] if folder.is_dir()]
    try:
        compaction.retire(store_dir, folders, grace_s=grace_s, lock_timeout_s=0.5)
    except compaction.CompactionBusy:
        pass  # the next run retires them


def _retire(
    store_dir: Path, manifest: Manifest, found: Manifest | None, between: list[Manifest], grace_s: float
) -> None:
    """Hands the files the previous manifest (and those the run published `between` it and this one) named
    and this one does not to compaction's deferred deletion; when compaction holds the store's maintenance
    lock they wait in the manifest for the next run."""
    retiring = set(manifest.retiring)
    named = {name for published in between for name in published.files()}
    if found is not None:
        named |= found.files() | set(found.retiring)
    retiring |= named - manifest.files()
    if not retiring:
        return
    try:
        paths = sorted(Path(name) for name in retiring)
        compaction.retire(store_dir, paths, grace_s=grace_s, lock_timeout_s=0.5)
        left: list[str] = []
    except compaction.CompactionBusy:
        left = sorted(retiring)
    if left != manifest.retiring:
        body = replace(manifest, retiring=left).to_json()
        target = store_dir / DERIVED_DIR / CURRENT_FILE
        tmp = segments.tmp_path(target)
        tmp.write_text(json.dumps(body, indent=1) + "\n")
        segments.publish(tmp, target)


def _indexed(run: _Run, previous: Manifest) -> set[str]:
    """The segments the previous version's index covers, as this store names them (follow_index)."""
    files = sql_list(previous.chunk_files("segments"))
    indexed = [file for file, _ in run.step("indexed_segments", {"files": files}).fetchall()]
    follow_index(run, next((file for file in indexed if file), None))
    return {run.here(file) for file in indexed}


def follow_index(run: _Run, indexed: str | None) -> None:
    """Notes in `run` the segments folder the previous index names its files in (`indexed`: one of them) when
    it is not this store's, and defines `turnlens_here(file)` on its connection: an indexed path as this
    store names it.

    The index names each segment by absolute path. In a store copied or moved (a restored backup, another
    disk, another mount point) none of those paths is the store's own: taken as they are, every indexed
    segment would look gone and every present one new, and the refresh would recompute every turn of the
    store at once. Read through `run.here` instead, they name the same segments under this store's folder,
    and the run writes the index again (merged into one chunk) with this store's paths."""
    here = str(Path(run.segments_glob).parent.parent)
    indexed_in = str(Path(indexed).parent.parent) if indexed else here
    if indexed_in == here:
        run.con.execute("create or replace temp macro turnlens_here(file) as file")
        return
    run.indexed_in = indexed_in
    # a macro's body takes no bound parameters: the two folders are quoted literals
    run.con.execute(
        "create or replace temp macro turnlens_here(file) as case when starts_with(file, "
        f"{catalog.sql_string(indexed_in + '/')}) then {catalog.sql_string(here)}"
        f" || file[{len(indexed_in) + 1}:] else file end"
    )


def _update_index(
    run: _Run, previous: Manifest, present: list[str]
) -> tuple[list[int], dict[str, int], dict[int, list[str]]]:
    """The index chunks of the next version, the newest copy of every indexed segment, and each chunk's
    segments (sorted, as its run numbers them): a new chunk for the segments the previous index did not know;
    chunks whose segments are all gone are dropped, and many chunks are merged into one. A chunk written here
    gets its run (identity_index.write_chunk_run), numbering its segments as the list returned does."""
    indexed: dict[str, int] = {}
    chunk_segments: dict[int, set[str]] = {}
    for chunk in previous.chunks:
        rows = run.step(
            "indexed_segments", {"files": sql_list([str(run._chunk("segments", chunk))])}
        ).fetchall()
        chunk_segments[chunk] = {run.here(file) for file, _ in rows}
        indexed |= {run.here(file): int(newest) for file, newest in rows if newest is not None}
    present_set = set(present)
    chunks = [chunk for chunk in previous.chunks if chunk_segments[chunk] & present_set]
    new = sorted(present_set - set(indexed) - {run.placeholder})
    if new or not chunks:  # a store of no segment yet keeps a chunk of none: readers list the chunks' files
        run.write_chunk(new)
        chunks.append(run.version)
        rows = run.step("indexed_segments", {"files": sql_list([str(run._chunk("segments"))])}).fetchall()
        chunk_segments[run.version] = {file for file, _ in rows}
        indexed |= {file: int(newest) for file, newest in rows if newest is not None}
    if len(chunks) > INDEX_CHUNKS_MAX or run.indexed_in is not None:  # moved: written with this store's paths
        merged = replace(previous, chunks=chunks)
        for kind, order in (("traces", "trace_id"), ("segments", None)):
            select = run.steps[f"chunk_merge_{kind}"].replace("{{files}}", sql_list(merged.chunk_files(kind)))
            target = run._chunk(kind, run.version)
            tmp = target.with_name(f".{target.name}.merge")
            run.con.execute("set variable turnlens_present = $present", {"present": present})
            run.copy(select.replace("$present", "getvariable('turnlens_present')"), tmp, order)
            os.replace(tmp, target)
        kept = {file for chunk in chunks for file in chunk_segments[chunk]}
        chunk_segments[run.version] = kept & present_set
        chunks = [run.version]
        run.write_chunk_run(run.version)
    lists = {chunk: sorted(chunk_segments[chunk]) for chunk in chunks}
    return chunks, {file: newest for file, newest in indexed.items() if file in present_set}, lists


def _gone_segments(indexed_before: set[str], present: list[str]) -> list[str]:
    """Segments the previous index knew whose whole day folder is gone: retention removed them (a merge leaves
    its output in the same folder, so the copies of merged segments are not gone)."""
    folders = {Path(file).parent for file in present}
    return sorted(file for file in indexed_before - set(present) if Path(file).parent not in folders)


def _refresh(
    run: _Run,
    previous: Manifest,
    deltas_max: int,
    copies_max: int,
    beside: FoldBeside | None = None,
    elsewhere: Collection[int] = (),
) -> tuple[Manifest, dict[str, Any]]:
    """Writes the rows of the turns the copies received since the previous watermark touch as a delta; folds
    the deltas into their partitions when they pile up, in line or `beside` (FoldBeside), whose finished fold
    it merges; not beside while another loop's fold is under way (`elsewhere`: their versions), which would
    fold the same deltas. Of more than `copies_max` new copies it takes the oldest (_backlog_cut) and leaves
    the rest to the next run."""
    present = run.present_segments()
    indexed_before = _indexed(run, previous)  # notes a copied or moved store's index (follow_index)
    chunks, newest_copy, chunk_lists = _update_index(run, previous, present)
    merged = {str(path) for path in compaction.merged_outputs(run.store_dir / segments.SEGMENTS_DIR)}
    new_segments = sorted(set(present) - indexed_before - merged - {run.placeholder})
    new_copy_files = read_order(
        {file for file, newest in newest_copy.items() if newest > previous.watermark}
        | (set(present) - set(newest_copy))
        | set(new_segments),
        run.placeholder,
    )
    gone = _gone_segments(indexed_before, present)
    index = replace(previous, chunks=chunks, version=run.version)
    values = {
        "watermark": str(previous.watermark),
        "new_copy_files": sql_list(new_copy_files),
        "new_segments": sql_list(new_segments),
    }
    upto, taken, waiting = _backlog_cut(run, values, copies_max)
    values |= {
        "upto": str(upto),
        "cutoff": str(run.cutoff),
        "index_traces_files": sql_list(index.chunk_files("traces")),
        "previous_index_traces_files": sql_list(previous.chunk_files("traces")),
        "gone_segments": sql_list(gone),
    }
    replaced, touched, input_files, rounds, input_copies = 0, set(), [], 0, 0
    read_parts: set[str] | None = set()
    # no copy to take and no segment gone: no turn's rows can change, and the recomputation of nothing would
    # still cost a run ~0.4 CPU s of planning (half a core for a loop on a store nobody sends to); the state
    # is published as it stands, with the run's watermark
    if taken or gone:
        run.step("no_key_flips")
        while True:  # once, unless a key's charges or commits changed findings of turns it kept (key_flips)
            rounds += 1
            read_parts = _touched(run, previous, values)
            # the segments the index names for the input traces: from each chunk's run, or for a chunk an
            # older turnlens wrote without one (until a merge replaces it) from a scan of its file
            with _timed("input_files"):
                traces = identity_index.hashes(run.con, "select trace_id from turnlens_fresh_input")
                named = [
                    identity_index.chunk_files_of(index.chunk_run_file(chunk), chunk_lists[chunk], traces)
                    for chunk in chunks
                    if index.chunk_run_file(chunk).exists()
                ]
            unrun = [chunk for chunk in chunks if not index.chunk_run_file(chunk).exists()]
            if unrun:
                listed = {"index_traces_files": sql_list(replace(index, chunks=unrun).chunk_files("traces"))}
                named.append({file for (file,) in run.step("input_files", values | listed).fetchall()})
            input_files = sorted(set().union(*named))
            unindexed = set(present) - set(newest_copy)
            values["input_files"] = sql_list(
                read_order((set(input_files) & set(present)) | unindexed, run.placeholder)
            )
            run.fresh_phase("recompute", values, HELD_RECOMPUTED)
            flips = [turn for (turn,) in run.step("key_flips").fetchall()]
            if not flips:
                break
            run.con.execute("insert into turnlens_key_flip_turns select unnest($t::varchar[])", {"t": flips})
        if read_parts is not None:  # the partitions holding previous rows of the replaced turns are read too
            replaced_turns = identity_index.hashes(run.con, "select turn_id from turnlens_replaced_turns")
            holding = identity_index.lookup(previous, {"turn": replaced_turns})
            if not holding <= read_parts:
                read_parts |= holding
                _read_identity(run, previous, read_parts)
        touched = {part for (part,) in run.step("touched_parts").fetchall()}
        [(replaced,)] = run.con.execute("select count(*) from turnlens_replaced_turns").fetchall()
        input_copies = run.held_rows["turnlens_fresh_stored"]
    deltas = list(previous.deltas)
    if touched:
        tables = run.write_delta()
        deltas.append({"version": run.version, "parts": sorted(touched), "tables": tables, "turns": replaced})
    manifest = replace(
        previous,
        version=run.version,
        watermark=run.watermark,
        built_unix=time.time(),
        chunks=chunks,
        deltas=deltas,
    )
    folded: list[str] = []
    took: tuple[float, float] | None = None  # the wall and CPU seconds of the fold beside merged (or dropped)
    if beside is not None:
        manifest, folded, took = beside.merge(run, manifest)
    roll_up = _roll_up_due(run, manifest)
    fold = bool(manifest.deltas) and (
        len(manifest.deltas) > deltas_max
        or sum(int(delta["turns"]) for delta in manifest.deltas) > DELTA_TURNS_MAX
        or bool(gone)
        or roll_up
    )
    start_beside = False
    if fold and beside is not None:
        # in line what must be whole when the run ends: before a roll-up, after retention, or when the deltas
        # outgrew the fold beside (the same rows, for the partitions it has not folded)
        if bool(gone) or roll_up or len(manifest.deltas) > max(DELTAS_HARD_MAX, 2 * deltas_max):
            manifest, waited, waited_took = beside.merge(run, manifest, wait=True)
            folded, took = folded + waited, waited_took or took
            fold = bool(manifest.deltas)
        else:
            start_beside, fold = not beside.running and not elsewhere, False
    if touched and (fold or roll_up):
        # the new rows are readers' before the fold and roll-up rewrite partitions (seconds for a large one):
        # this version publishes the delta, the next one, in the same run, the rewritten partitions
        manifest = publish(run, manifest)
        run.version += 1
        manifest = replace(manifest, version=run.version)
    if fold:
        manifest, in_line = _fold(run, manifest)
        folded = sorted(set(folded) | set(in_line))
    manifest = publish(run, _roll_up(run, manifest))
    start_beside = start_beside and bool(manifest.deltas)
    if start_beside:
        assert beside is not None
        beside.start(manifest, run.version + 1)
    return manifest, {
        "mode": "refresh",
        "touched_turns": int(replaced),
        "written_partitions": sorted(touched),
        "folded_partitions": folded,
        "fold_beside": "started" if start_beside else None,
        "fold_beside_seconds": None if took is None else round(took[0], 3),
        "fold_beside_cpu_seconds": None if took is None else round(took[1], 3),
        "deltas": len(manifest.deltas),
        "dropped_partitions": sorted(previous.parts() - manifest.parts()),
        "gone_segments": len(gone),
        "input_segments": len(input_files),
        "identity_partitions_read": len(previous.partitions) if read_parts is None else len(read_parts),
        "buckets": 1,
        "new_copies": taken,
        "input_copies": input_copies,
        "backlog_copies": waiting,
        "key_rounds": rounds,
    }


def _backlog_cut(run: _Run, values: Mapping[str, str], copies_max: int) -> tuple[int, int, int]:
    """The newest received time a refresh takes, how many new copies it takes and how many it leaves to the
    next run. Up to `copies_max` new copies it takes them all (NO_UPTO). Past that it takes those received up
    to the `copies_max`-th oldest's time (a few more where copies share that time) and moves the run's
    watermark back to it: the state it publishes covers exactly what it took, and the next run goes on from
    there (a copy it left is received after that watermark, so the next run's new copies hold it). Each run
    then needs the memory of one bucket of a full build, and readers see the state advance run by run rather
    than after one refresh of the whole backlog."""
    [(count, cut, taken)] = run.step("backlog", values, {"copies": copies_max}).fetchall()
    # none past the share, or the newest it would leave were received inside the margin: take them all
    if count <= copies_max or cut >= run.watermark:
        return NO_UPTO, int(count), 0
    run.move_watermark(cut)
    return cut, int(taken), int(count - taken)


def _touched(run: _Run, previous: Manifest, values: dict[str, str]) -> set[str] | None:
    """Holds the touched phase of derived/fresh.sql (HELD_TOUCHED), reading the identity rows of only the
    partitions that can hold rows it joins; returns those partitions (None: it read every partition, the
    previous state's identity index not being whole).

    Every join of the phase matches identity rows on a value of one of four sets it computes: the input
    traces' ids (by trace id, and by the trace a link points to), their idempotency keys, and the touched
    turns' ids. The phase runs over the partitions read so far (none, at first: the deltas only), the index
    names the partitions holding rows with a value of those sets, and the phase runs again with them until it
    names no other. Then each join has seen every row of the store it matches, and the sets are those a read
    of every partition gives."""
    parts: set[str] | None = set() if identity_index.whole(previous) else None
    first = True
    while True:
        _read_identity(run, previous, parts)
        if first:
            run.step("previous_state", values)
            first = False
        run.fresh_phase("touched", values, HELD_TOUCHED)
        if parts is None:
            return None
        with _timed("look up identity"):
            traces = identity_index.hashes(run.con, "select trace_id from turnlens_fresh_input")
            probes = {
                "trace": traces,
                "linked": traces,
                "turn": identity_index.hashes(run.con, "select turn_id from turnlens_touched_turn_ids"),
                "key": identity_index.hashes(
                    run.con,
                    "select idempotency_key from turnlens_trace_keys"
                    " semi join turnlens_fresh_input using (trace_id)",
                ),
            }
            needed = identity_index.lookup(previous, probes)
        if needed <= parts:
            return parts
        parts |= needed


def _read_identity(run: _Run, previous: Manifest, parts: set[str] | None) -> None:
    """Points the previous state's identity views (derived/current.sql) at these partitions' files and every
    delta (all partitions when None), and names them turnlens_prev_<table>. Read from some partitions, they
    are held: the touched phase scans them eleven times, each scan resolving again which delta's rows are in
    force (an idle run spent 0.6 s on it); read from every partition, they would copy the whole store's."""
    with _timed("define current"):
        restricted = identity_index.restricted(previous, parts)
        _apply_sql(run.con, "current.sql", {}, restricted, IDENTITY, temp=True)
    run.step("previous_identity")
    if parts is not None:
        run.hold(tuple(f"turnlens_prev_{table}" for table in IDENTITY))


def _fold(run: _Run, manifest: Manifest) -> tuple[Manifest, list[str]]:
    """Folds every delta into the base files of the partitions the deltas touched, in this run's version
    (_fold_files). The deltas leave the manifest; a partition left without turns is dropped."""
    parts = _fold_files(run, manifest)
    partitions = dict(manifest.partitions) | dict.fromkeys(parts, run.version)
    folded = replace(manifest, partitions=partitions, deltas=[])
    return _drop_empty(run, folded, set(parts)), parts


def _fold_files(run: _Run, manifest: Manifest) -> list[str]:
    """Writes, in the run's version, the base file of each partition the manifest's deltas touched: its base
    rows of turns no delta replaced and the rows in force of the deltas' turns that belong to it. Returns
    those partitions."""
    with _timed("define current"):
        _apply_sql(run.con, "current.sql", {}, manifest, TABLES, temp=True)
    run.hold(("turnlens_superseded", *(f"turnlens_delta_{table}" for table in TABLES)))
    parts = sorted(manifest.unsettled_parts())
    for part in parts:
        for table in TABLES:
            previous = manifest.partition_file(table, part) if part in manifest.partitions else None
            run.write_fold(table, part, previous)
    return parts


class FoldBeside:
    """Folds the deltas on a thread and a DuckDB connection of its own while a loop's refreshes go on
    (`turnlens materialize --every`, the collector's materialiser).

    Folded in line, a fold stopped the refreshes for as long as it rewrote its partitions (~9 s at 10,000
    spans/s, every ~24 refreshes), and every finding acknowledged meanwhile waited for it. Beside them, the
    fold rewrites the partitions the deltas of one published manifest (its `base`) touched, in a version the
    loop's refreshes skip (`version`), and a later refresh merges it (`merge`): the partitions take the new
    base files, the deltas folded leave the manifest. Deltas the refreshes wrote meanwhile stay: each is newer
    than the fold's input, and a delta's rows override a partition's rows of the same turn whatever the
    partition's version (derived/current.sql). The merge holds only if nothing else rewrote those partitions
    or dropped those deltas meanwhile (another process's fold, between two of the loop's runs); otherwise the
    fold's files are removed and the deltas stay for the next fold.

    The fold reads only files the base manifest names, under a reader lease of its own; it connects to a copy
    of the catalogue, since a second connection to the catalogue's own file would share the refreshes'
    database (its settings, and the catalogue a refresh replaces). A marker (FOLD_PREFIX) names its process
    and version until the merge: a run finding one of a dead process removes that version's files
    (_remove_dead_folds)."""

    def __init__(
        self, store_dir: Path, segments_glob: str, memory_limit: str | None, spill_dir: Path | None
    ) -> None:
        self.store_dir = store_dir.resolve()  # as materialize's: the files a fold writes are named absolute
        self.segments_glob = segments_glob
        self.memory_limit = memory_limit
        self.spill_base = (spill_dir or self.store_dir / DERIVED_DIR) / FOLD_SPILL_DIR
        self.base: Manifest | None = None  # the manifest being folded, None when no fold is under way
        self.version = 0  # the version the fold's files take: the loop's next refresh takes a later one
        self.parts: list[str] = []
        self.empty: set[str] = set()  # folded partitions left without turns
        self.error: BaseException | None = None
        self.seconds = self.cpu_seconds = 0.0  # the last fold's, wall and CPU
        self.marker = store_dir / DERIVED_DIR / f"{FOLD_PREFIX}{uuid.uuid4().hex}"
        self._thread: threading.Thread | None = None
        self._con: Any = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, base: Manifest, version: int) -> None:
        """Starts folding `base`'s deltas into files of `version` (under the derived-state lock)."""
        self.base, self.version, self.parts, self.empty, self.error = base, version, [], set(), None
        marker = {
            "pid": os.getpid(),
            "started": _process_started(os.getpid()),
            "host": segments.host_tag(),
            "version": version,
        }
        tmp = segments.tmp_path(self.marker)
        tmp.write_text(json.dumps(marker) + "\n")
        segments.publish(tmp, self.marker)
        self._thread = threading.Thread(target=self._fold, name="fold", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def close(self, timeout_s: float = 10.0) -> None:
        """Interrupts a fold under way (its loop stops); its files stay for the next run to remove."""
        con = self._con
        if self.running and con is not None:
            con.interrupt()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _fold(self) -> None:
        started, cpu = time.perf_counter(), time.thread_time()  # one DuckDB thread: this one
        _BESIDE_CPU.enter()
        try:
            self._fold_on_this_thread()
        finally:
            self.seconds = time.perf_counter() - started
            self.cpu_seconds = time.thread_time() - cpu
            _BESIDE_CPU.leave()

    def _fold_on_this_thread(self) -> None:
        lower_thread_priority(FOLD_NICE)
        _OWN_TIMINGS.pair = (defaultdict(float), defaultdict(float))
        assert self.base is not None
        try:
            with leases.reading(self.store_dir, long=True):
                own = spill_folder(self.store_dir, self.spill_base)
                own.mkdir(parents=True, exist_ok=True)
                catalogue = own / catalog.CATALOG_FILE
                shutil.copyfile(self.store_dir / catalog.CATALOG_FILE, catalogue)
                con = self._con = duckdb.connect(str(catalogue), read_only=True)
                try:
                    _configure(con, 1, own / SPILL_DIR, self.memory_limit)
                    run = _Run(self.store_dir, self.segments_glob, con, self.base.watermark, self.version)
                    self.parts = _fold_files(run, self.base)
                    turns = {part: [str(run.partition_file("trace_turns", part))] for part in self.parts}
                    self.empty = {part for part in self.parts if run.count(turns[part]) == 0}
                    for part in sorted(set(self.parts) - self.empty):
                        write_partition_rollups(run, part)
                    for directory in sorted(run.written_dirs | {d.parent for d in run.written_dirs}):
                        segments.fsync_dir(directory)
                finally:
                    self._con = None
                    con.close()
                    shutil.rmtree(own, ignore_errors=True)
        except Exception as exc:  # noqa: BLE001 - any failure discards the fold; the refreshes go on
            self.error = exc

    def merge(
        self, run: _Run, manifest: Manifest, wait: bool = False
    ) -> tuple[Manifest, list[str], tuple[float, float] | None]:
        """`manifest` with the finished fold's partitions and without the deltas it folded, those partitions,
        and the fold's wall and CPU seconds; `manifest` unchanged (and None) while the fold runs, unless
        `wait`, or when none was started. A fold that failed, or whose partitions or deltas changed since it
        began, is discarded."""
        if wait:
            self.wait()
        if self.base is None or self.running:
            return manifest, [], None
        base, self.base = self.base, None
        took = (self.seconds, self.cpu_seconds)
        folded = {int(delta["version"]) for delta in base.deltas}
        unchanged = (
            self.error is None
            and manifest.complete
            and manifest.inputs_sha256 == base.inputs_sha256
            and folded <= {int(delta["version"]) for delta in manifest.deltas}
            and all(manifest.partitions.get(part) == base.partitions.get(part) for part in self.parts)
        )
        if not unchanged:
            if self.error is not None:
                print(
                    f"turnlens materialize: the fold beside the refreshes failed ({self.error});"
                    " the deltas stay for the next fold",
                    file=sys.stderr,
                    flush=True,
                )
            _remove_fold_files(run.folder, self.version, manifest.files(), self.marker)
            return manifest, [], took
        kept = set(self.parts) - self.empty
        partitions = {p: v for p, v in manifest.partitions.items() if p not in self.empty}
        merged = replace(
            manifest,
            partitions=partitions | dict.fromkeys(kept, self.version),
            deltas=[delta for delta in manifest.deltas if int(delta["version"]) not in folded],
        )
        _remove_fold_files(run.folder, self.version, merged.files(), self.marker)  # empty partitions' files
        return merged, self.parts, took


def _remove_fold_files(folder: Path, version: int, named: set[str], marker: Path) -> None:
    """Removes a fold's files of `version` that no manifest names (`named`), then its marker."""
    for path in folder.glob(f"*/*/v{version}.parquet"):
        if str(path) not in named:
            path.unlink(missing_ok=True)
    marker.unlink(missing_ok=True)


def _process_started(pid: int) -> int | None:
    """When a process of this host started, in clock ticks since boot (/proc/PID/stat; 0 where there is no
    /proc), None when none runs under `pid`: a pid and its start time name one process, where a pid alone may
    be a dead one's, reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        if Path("/proc/self/stat").exists():
            return None
        return 0 if segments.pid_alive(pid) else None
    return int(stat.rsplit(")", 1)[1].split()[19])  # after the command's name: field 22, starttime


def _remove_dead_folds(folder: Path, found: Manifest | None) -> set[int]:
    """Removes the files no manifest names of each fold beside the refreshes whose process died (a marker,
    FOLD_PREFIX, names its process and version); returns the versions of the folds under way, whose files
    stay (another host's cannot be told from a dead one's, and stay too)."""
    live: set[int] = set()
    for marker in folder.glob(f"{FOLD_PREFIX}*"):
        try:
            body = json.loads(marker.read_text())
            version, pid, started = int(body["version"]), int(body["pid"]), int(body["started"])
        except FileNotFoundError:
            continue  # merged meanwhile
        except (OSError, ValueError, KeyError, TypeError):
            marker.unlink(missing_ok=True)  # published whole or not at all: not a marker of ours
            continue
        if body.get("host") != segments.host_tag() or _process_started(pid) == started:
            live.add(version)
        else:
            _remove_fold_files(folder, version, found.files() if found else set(), marker)
    return live


def _roll_up_due(run: _Run, manifest: Manifest) -> bool:
    """Whether a minute partition (with a base file or in a delta) belongs to an hour to roll up."""
    cutoff = time.strftime("%Y%m%dT%H", time.gmtime(run.cutoff / 1e9))
    return any(len(part) == len("YYYYMMDDTHHMM") and part[:11] < cutoff for part in manifest.parts())


def _drop_empty(run: _Run, manifest: Manifest, parts: set[str]) -> Manifest:
    """Forgets the rewritten partitions that hold no turn any more (their turns moved, or their spans
    left)."""
    empty = [
        part
        for part in parts
        if part in manifest.partitions and run.count([str(manifest.partition_file("trace_turns", part))]) == 0
    ]
    if not empty:
        return manifest
    return replace(manifest, partitions={p: v for p, v in manifest.partitions.items() if p not in empty})


def _roll_up(run: _Run, manifest: Manifest) -> Manifest:
    """Merges the minute partitions of each hour that began before the cutoff into that hour's partition."""
    hours: dict[str, list[str]] = defaultdict(list)
    cutoff = time.strftime("%Y%m%dT%H", time.gmtime(run.cutoff / 1e9))
    for part in manifest.partitions:
        if len(part) == len("YYYYMMDDTHHMM") and part[:11] < cutoff:
            hours[part[:11]].append(part)
    if not hours:
        return manifest
    partitions = dict(manifest.partitions)
    for hour, minutes in sorted(hours.items()):
        sources = sorted(minutes + ([hour] if hour in partitions else []))
        for table in TABLES:
            files = sql_list([str(manifest.partition_file(table, part)) for part in sources])
            step = "rolled_up_trace_turns" if table == "trace_turns" else "rolled_up_rows"
            select = fill(run.steps[step], {"files": files, "part": catalog.sql_string(hour)})
            target = run.partition_file(table, hour)
            tmp = target.with_name(f".{target.name}.rollup")  # the hour may be a source written by this run
            run.copy(select, tmp, IDENTITY_ORDER.get(table))
            os.replace(tmp, target)
        for part in minutes:
            del partitions[part]
        partitions[hour] = run.version
    return replace(manifest, partitions=partitions)


def _bootstrap(run: _Run, found: Manifest | None) -> Manifest:
    """An empty, whole state covering no copy (watermark 0), written but not published: its zero-row files
    and an index chunk of no segment. A refresh from it takes every copy of the store as new, and is the
    version published; a store of a few minutes of spans is thus readable after one refresh's time instead
    of a full build's."""
    run.write_chunk([])
    manifest = Manifest(
        folder=run.folder,
        version=run.version,
        inputs_sha256=inputs_fingerprint(run.store_dir),
        watermark=0,
        built_unix=time.time(),
        partitions={},
        chunks=[run.version],
        template=run.version,
        retiring=list(found.retiring) if found else [],
    )
    run.step("empty_state")
    run.step("no_key_flips")
    values = {
        "watermark": str(2**62),
        "new_copy_files": sql_list([run.placeholder]),
        "new_segments": sql_list([]),
        "upto": str(NO_UPTO),
        "cutoff": str(run.cutoff),
        "index_traces_files": sql_list(manifest.chunk_files("traces")),
        "input_files": sql_list([run.placeholder]),
    }
    # held as the refresh that follows holds them (it replaces each by a relation of the same kind)
    run.fresh_phase("touched", values, HELD_TOUCHED)
    run.fresh_phase("recompute", values, HELD_RECOMPUTED)
    run.write_templates(manifest)
    return manifest


def _full_build(
    run: _Run, found: Manifest | None, bucket_spans: int, engine: BuildEngine
) -> tuple[Manifest, dict[str, Any]]:
    """Every turn recomputed a unit at a time (a bucket of partitions, or a slice of a large one), newest
    first, each bucket published when done.

    The whole store is read twice, whatever its size: once for each trace's identity, keys and links (narrow
    columns), and once to write each unit's input copies to the unit's own files (`shuffle_pass`). A unit's
    job then reads only those files, so the build's time follows the store's size and its memory a unit's;
    `engine` runs the identity's chunks, the shuffle's passes and the units' jobs (LocalEngine: one after
    another on this connection; queries/spark_engine.py: as Spark tasks). What the first pass
    computed is kept beside the state (`_write_plan`) until the build is whole, so that a run after this one
    dies finishes it (`_resume_build`) instead of starting again."""
    present = run.present_segments()
    for folder in run.folder.glob(f"{PLAN_PREFIX}*"):  # another build's first pass: this one replaces it
        _remove_tree(folder)
    run.write_chunk([file for file in present if file != run.placeholder])
    manifest = Manifest(
        folder=run.folder,
        version=run.version,
        inputs_sha256=inputs_fingerprint(run.store_dir),
        watermark=run.watermark,
        built_unix=time.time(),
        partitions={},
        chunks=[run.version],
        template=run.version,
        retiring=list(found.retiring) if found else [],
        plan=run.version,
    )
    chunks = 1
    chunk_copies = engine.identity_chunk_copies(run)
    if run.stored_copies() <= chunk_copies:
        run.step("whole_store_identity")
        run.step("whole_store_keys_links")
    else:  # each chunk finds its traces' keys and links too: a pass over the whole store less on the driver
        chunks = _identity_in_chunks(run, manifest, present, engine, chunk_copies)
    sizes: dict[str, int] = defaultdict(int)
    for part, spans in run.step("turn_sizes", params={"cutoff": run.cutoff}).fetchall():
        sizes[part] += int(spans)
    buckets = _buckets(sizes, bucket_spans)
    manifest = replace(manifest, partitions_total=len(sizes))
    units = _units(buckets)
    run.step(
        "unit_turns",
        params={
            "cutoff": run.cutoff,
            "parts": [part for part, _, _ in units],
            "first_units": [first for _, first, _ in units],
            "slices": [slices for _, _, slices in units],
        },
    )
    [(fact_turns, fact_units)] = run.step(
        "key_fact_units", params={"first": sum(slices for _, slices in buckets), "copies": bucket_spans}
    ).fetchall()
    _write_plan(run, buckets, sum(sizes.values()), fact_units)
    manifest, summary = _build_units(
        run, manifest, present, buckets, engine, fresh=True, fact_units=fact_units
    )
    return manifest, summary | {"identity_chunks": chunks, "key_fact_turns": fact_turns}


@dataclass(frozen=True)
class IdentityChunks:
    """A full build's identity in chunks (`_identity_in_chunks`): what resolving one chunk needs, on the
    build's connection or on one of its own (a Spark task, which writes the chunk's rows to `folder`)."""

    index: Manifest
    chunk_lists: dict[int, list[str]]
    present: list[str]
    files: list[str]  # the index's segments, in its order, and the group of each
    groups: list[int]
    folder: Path

    @property
    def count(self) -> int:
        """The chunks: one per group (one when the index names no segment)."""
        return max(self.groups, default=0) + 1

    def chunk_file(self, chunk: int, table: str = "trace_turns") -> Path:
        """Where a chunk resolved apart writes its rows of one of IDENTITY_TABLES."""
        return self.folder / f"{IDENTITY_TABLES[table]}-{chunk}.parquet"


# the build's identity tables -> the prefix of the files a chunk resolved apart writes them to
IDENTITY_TABLES = {"trace_turns": "chunk", "trace_keys": "keys", "trace_links": "links"}


def _identity_in_chunks(
    run: _Run, index: Manifest, present: list[str], engine: BuildEngine, chunk_copies: int
) -> int:
    """Each trace's turn, start and size (whole_store_identity), keys and links (whole_store_keys_links)
    resolved a chunk of traces at a time: a trace
    belongs to the first group of segments holding a copy of it, in the order the index numbers them, each
    group about `chunk_copies` copies. A chunk reads the segments the index names for its traces and
    for those they link to, so the chunks read the store about once between them (a chunk of traces by a hash
    of their ids would find them in every segment, and read the store once per chunk); `engine` resolves
    them. Returns the chunks."""
    chunk_lists = _chunk_lists(run, index)
    [listed] = chunk_lists.values()
    rows = dict(
        run.con.execute(
            "select file_name, sum(num_rows)::bigint from parquet_file_metadata($files) group by all",
            {"files": listed or [run.placeholder]},
        ).fetchall()
    )
    groups: list[int] = []
    group = copies = 0
    for file in listed:
        if copies >= chunk_copies:
            group, copies = group + 1, 0
        groups.append(group)
        copies += rows.get(file, 0)
    folder = run.folder / f"{IDENTITY_PREFIX}{run.version}"
    chunks = IdentityChunks(index, chunk_lists, present, listed, groups, folder)
    _start_identity_chunks(run, chunks)
    engine.identity_chunks(run, chunks)
    run.step("identity_chunks_done")
    _remove_tree(folder)
    return chunks.count


def identity_chunk_copies(threads: int) -> int:
    """The copies a chunk of the identity resolves at once on a connection of `threads` threads."""
    return IDENTITY_CHUNK_COPIES if threads > 1 else IDENTITY_CHUNK_COPIES_ONE_THREAD


def _start_identity_chunks(run: _Run, chunks: IdentityChunks) -> None:
    """Each trace's chunk (turnlens_trace_chunks), and the identity tables (IDENTITY_TABLES) empty."""
    run.step(
        "identity_chunks",
        {"index_traces_files": sql_list(chunks.index.chunk_files("traces"))},
        params={"files": chunks.files, "groups": chunks.groups},
    )


def identity_chunk(run: _Run, chunks: IdentityChunks, chunk: int) -> None:
    """Adds the identity of one chunk's traces to turnlens_all_trace_turns on `run`'s connection, their keys
    and links to turnlens_all_trace_keys and turnlens_all_trace_links."""
    run.con.execute("set variable turnlens_chunk = $chunk", {"chunk": chunk})
    own = "select trace_id from turnlens_trace_chunks where chunk = getvariable('turnlens_chunk')"
    files = _segments_holding(run, chunks.index, chunks.chunk_lists, chunks.present, own)
    run.step("identity_chunk_traces", {"files": _listed(run, chunks.present, files)}, params={"chunk": chunk})
    linked = "select trace_id from turnlens_chunk_traces"
    files = _segments_holding(run, chunks.index, chunks.chunk_lists, chunks.present, linked)
    run.step("identity_chunk", {"files": _listed(run, chunks.present, files)}, params={"chunk": chunk})


def identity_chunk_apart(run: _Run, chunks: IdentityChunks, chunk: int) -> Path:
    """One chunk's identity on a connection of its own (a Spark task): resolved as on the build's, its rows
    written to the chunk's files, which read_identity_chunks adds to the build's. Returns the identity's."""
    _start_identity_chunks(run, chunks)
    identity_chunk(run, chunks, chunk)
    for table in IDENTITY_TABLES:
        target = chunks.chunk_file(chunk, table)
        run.copy(f"select * from turnlens_all_{table}", target, step="write identity chunk")
    return chunks.chunk_file(chunk)


def read_identity_chunks(run: _Run, chunks: IdentityChunks) -> None:
    """Adds the rows every chunk's files hold (identity_chunk_apart) to the build's identity tables."""

    def files(table: str) -> str:
        return sql_list([str(chunks.chunk_file(chunk, table)) for chunk in range(chunks.count)])

    values = {"files": files("trace_turns"), "keys_files": files("trace_keys")}
    run.step("identity_chunks_read", values | {"links_files": files("trace_links")})


def _listed(run: _Run, present: list[str], files: set[str] | None) -> str:
    """`files` (every present segment when None) as a list of Parquet files to read."""
    return sql_list(read_order(present if files is None else files, run.placeholder))


def _resume_build(run: _Run, found: Manifest, engine: BuildEngine) -> tuple[Manifest, dict[str, Any]]:
    """Finishes the full build `found` describes, which a run that died left incomplete: its published
    buckets stay as they are, the others are computed from its first pass (`_write_plan`) as that run would
    have computed them, at its watermark (`run` is made with it: the roll-up cutoff, and so each turn's
    partition, are the same). The run's first publish is its first finished bucket."""
    assert found.plan is not None
    plan = _read_plan(run.folder, found.plan)
    run.step("resumed_identity", _plan_values(run.folder, found.plan))
    buckets = [(list(parts), int(slices)) for parts, slices in plan["buckets"]]
    manifest = replace(found, version=run.version)
    manifest, summary = _build_units(
        run, manifest, run.present_segments(), buckets, engine, fresh=False, fact_units=plan["key_fact_units"]
    )
    return manifest, summary | {"copies": plan["copies"], "resumed_from": found.version}


def _build_units(
    run: _Run,
    manifest: Manifest,
    present: list[str],
    buckets: list[tuple[list[str], int]],
    engine: BuildEngine,
    fresh: bool,
    fact_units: int,
) -> tuple[Manifest, dict[str, Any]]:
    """Computes the buckets `manifest` does not name yet (all of them when `fresh`: it then publishes the
    empty state first), publishing each as it is done and the state whole after the last. Before them, the
    `fact_units` key-fact units (key_fact_units) that the buckets' units read: computed again whenever a
    bucket is, since only the shuffle folder of this run holds them."""
    run.step("whole_store_views")
    values = {
        "watermark": str(2**62),  # no copy is new: the seed names the traces
        "new_copy_files": sql_list([run.placeholder]),
        "new_segments": sql_list([]),
        "upto": str(NO_UPTO),
        "cutoff": str(run.cutoff),
        "index_traces_files": sql_list(manifest.chunk_files("traces")),
        "input_files": sql_list(read_order(present, run.placeholder)),
    }
    run.step("bucket_seed", params={"unit": -1})
    run.step("no_key_flips")
    run.fresh_phase("touched", values)
    run.step("seeded_fresh_traces")
    run.fresh_phase("recompute", values)
    if fresh:
        run.write_templates(manifest)
        # readers see an empty state that says a build is under way, and keep seeing that the state is not
        # whole if the build dies before its last bucket
        manifest = publish(run, manifest)
    jobs: list[tuple[list[str], range]] = []  # each bucket with the units that compute it
    first = 0
    for bucket, slices in buckets:
        if not set(bucket) <= set(manifest.partitions):  # published buckets are kept as they are
            jobs.append((bucket, range(first, first + slices)))
        first += slices
    facts = list(range(first, first + fact_units)) if jobs else []
    shuffle = _prepare_shuffle(
        run, [unit for _, numbers in jobs for unit in numbers], facts, present, manifest
    )
    values["kept_key_facts"] = shuffle.kept_key_facts()
    for done, bucket in enumerate(engine.units(run, values, jobs, shuffle), start=1):
        manifest = replace(manifest, partitions=manifest.partitions | dict.fromkeys(bucket, run.version))
        if done < len(jobs):  # the last bucket is published whole, below
            manifest = publish(run, manifest)
    _remove_tree(shuffle.folder)
    plan = manifest.plan
    manifest = publish(run, replace(manifest, partitions_total=None, plan=None, built_unix=time.time()))
    if plan is not None:  # the state is whole: no run resumes this build any more
        _remove_tree(run.folder / f"{PLAN_PREFIX}{plan}")
    return manifest, {
        "mode": "full",
        "buckets": len(buckets),
        "buckets_built": len(jobs),
        "buckets_reused": len(buckets) - len(jobs),
        "units": first,
        "units_built": sum(len(numbers) for _, numbers in jobs),
        "key_fact_units": len(facts),
        "shuffle_segments_read": shuffle.reads,  # per pass, of `segments` (the placeholder counted)
        "shuffle_copies": sum(shuffle.copies),  # the units' input copies written, key-fact units' included
        "segments": len(present),
    }


def _plan_values(folder: Path, version: int) -> dict[str, str]:
    """The files of a full build's first pass, as SQL constants (resumed_identity)."""
    plan = folder / f"{PLAN_PREFIX}{version}"
    files = {name: plan / f"{name}.parquet" for name in PLAN_TABLES.values()}
    return {f"{name}_file": catalog.sql_string(str(file)) for name, file in files.items()}


def _write_plan(run: _Run, buckets: list[tuple[list[str], int]], copies: int, fact_units: int) -> None:
    """Keeps what a full build's first pass computed in `.build-v<N>/`, durably before the build's first
    publish: each trace's turn, keys and links over the whole store, each turn's unit (and key-fact unit),
    and the buckets. A bucket's rows depend on these (which traces it reads, which partition a turn goes to,
    whose key facts it counts), not only on the copies, so a run that resumes the build reads them rather than
    computing them again from a store that may have received spans since."""
    plan = run.folder / f"{PLAN_PREFIX}{run.version}"  # _full_build removed every earlier one
    for table, name in PLAN_TABLES.items():
        run.copy(f"select * from {table}", plan / f"{name}.parquet", step="write plan")
    body = {"version": run.version, "buckets": buckets, "copies": copies, "key_fact_units": fact_units}
    target = plan / PLAN_FILE
    tmp = segments.tmp_path(target)
    tmp.write_text(json.dumps(body) + "\n")
    segments.publish(tmp, target)


def _read_plan(folder: Path, version: int) -> dict[str, Any]:
    """A full build's plan (`_write_plan`); raises FileNotFoundError or ValueError if it is not whole."""
    plan = folder / f"{PLAN_PREFIX}{version}"
    body: dict[str, Any] = json.loads((plan / PLAN_FILE).read_text())
    missing = [name for name in PLAN_TABLES.values() if not (plan / f"{name}.parquet").is_file()]
    if body.get("version") != version or missing:
        raise ValueError(f"{plan} lacks {', '.join(missing) or 'its version'}")
    return body


def _resume_refusal(run: _Run, found: Manifest) -> str | None:
    """Why the incomplete full build `found` cannot be finished (it must be built again), or None if it can:
    its rows are still the rows of the store's current inputs, its plan is whole, and every segment it read
    is still there or was merged by compaction (same folder, same copies) rather than dropped by retention."""
    if found.inputs_sha256 != inputs_fingerprint(run.store_dir):
        return "the views' inputs changed since it started (tool_registry.toml, or the views' SQL)"
    if found.plan is None:
        return "it left no plan of its first pass"
    try:
        _read_plan(run.folder, found.plan)
    except (OSError, ValueError) as exc:
        return f"its plan is not readable ({exc})"
    gone = _gone_segments(_indexed(run, found), run.present_segments())
    if gone:
        return f"retention removed {len(gone)} of the segments it read"
    return None


class LocalEngine:
    """The default BuildEngine: a full build's work one piece after another on the run's own connection."""

    def identity_chunk_copies(self, run: _Run) -> int:
        [(threads,)] = run.con.execute("select current_setting('threads')").fetchall()
        return identity_chunk_copies(int(threads))

    def identity_chunks(self, run: _Run, chunks: IdentityChunks) -> None:
        for chunk in range(chunks.count):
            identity_chunk(run, chunks, chunk)

    def units(
        self, run: _Run, values: dict[str, str], units: list[tuple[list[str], range]], shuffle: Shuffle
    ) -> Iterator[list[str]]:
        """The shuffle, UNITS_PER_PASS units a pass, then the key-fact units, then the units one after
        another; yields each bucket once its partitions' files are written (the build publishes it)."""
        for batch in shuffle.passes(UNITS_PER_PASS):
            shuffle.ended(*shuffle_pass(run, shuffle, batch))
        run.step("shuffle_done")
        for unit in shuffle.facts:
            write_key_facts(run, values, shuffle.folder, unit)
        for bucket, numbers in units:
            for slice_, unit in enumerate(numbers):
                write_unit(run, values, shuffle.folder, bucket, len(numbers), slice_, unit)
            if len(numbers) > 1:
                _join_slices(run, bucket[0], len(numbers))
            yield bucket

    def close(self) -> None:
        pass


def write_unit(
    run: _Run, values: dict[str, str], shuffle: Path, bucket: list[str], slices: int, slice_: int, unit: int
) -> None:
    """Computes one unit (a bucket, or slice `slice_` of `slices` of a one-partition bucket) from its own
    files and writes its partitions' files (slice files when sliced); its input copies go once it is done."""
    _compute_bucket(run, values, shuffle, unit)
    for part in bucket:
        for table in TABLES:
            run.write_partition(table, part, slice_=slice_ if slices > 1 else None)
        if slices == 1:  # a sliced partition's rollups follow the join of its slices
            write_partition_rollups(run, part)
    _remove_tree(shuffle / "copies" / f"unit={unit}")


def write_key_facts(run: _Run, values: dict[str, str], shuffle: Path, unit: int) -> None:
    """Computes the key facts of one key-fact unit's turns (key_fact_units) from its own files, as their own
    units compute them, into `facts/unit=<n>.parquet` of the shuffle folder, which the units read
    (Shuffle.kept_key_facts); its input copies go once it is done."""
    _compute_bucket(run, values | {"kept_key_facts": "turnlens_no_key_facts"}, shuffle, unit, FACTS_HELD)
    target = catalog.sql_string(str(Shuffle.facts_file(shuffle, unit)))
    run.step("unit_key_facts", {"target": target}, timed_as="write key facts")
    _remove_tree(shuffle / "copies" / f"unit={unit}")


def _units(buckets: list[tuple[list[str], int]]) -> list[tuple[str, int, int]]:
    """Each partition with the first unit that computes it and how many units (slices) do: a bucket is one
    unit for all its partitions, a partition larger than a bucket one unit per slice."""
    units: list[tuple[str, int, int]] = []
    first = 0
    for bucket, slices in buckets:
        units += [(part, first, slices) for part in bucket]
        first += slices
    return units


@dataclass
class Shuffle:
    """Where a full build's shuffle writes each unit's input — every stored copy of the traces its turns need
    (their own, those linking to them, those they link to) in `copies/unit=<n>/`, and its turns in
    `turns/unit=<n>/` — and what a pass over the store needs to find them: the present segments and the
    trace -> segment index. A pass (shuffle_pass) runs on the build's connection or on one of its own (a
    Spark task), which reads the whole store's identity from the build's first pass (`.build-v<plan>/`).
    The key-fact units' jobs (write_key_facts) write their turns' key facts to `facts/unit=<n>.parquet`,
    which every unit's job reads beside its own files.

    This is the seam between the whole store and the per-unit jobs: a unit's job (`_compute_bucket`) reads
    these files and nothing else, so the same job can run on another engine given the same files."""

    folder: Path
    units: list[int]  # the units to compute, newest first
    facts: list[int]  # the key-fact units, whose jobs end before any unit's starts
    present: list[str]
    index: Manifest
    chunk_lists: dict[int, list[str]]
    reads: list[int] = field(default_factory=list)  # the segments each pass read, as the passes end
    copies: list[int] = field(default_factory=list)  # the copies each pass wrote

    def ended(self, reads: int, copies: int) -> None:
        """Counts a pass that ended (shuffle_pass's answer)."""
        self.reads.append(reads)
        self.copies.append(copies)

    @staticmethod
    def facts_file(folder: Path, unit: int) -> Path:
        return folder / "facts" / f"unit={unit}.parquet"

    def kept_key_facts(self) -> str:
        """The relation of the key-fact units' files a unit's job reads as the facts of other units' turns
        (unit_job's kept_key_facts): none without key-fact units."""
        if not self.facts:
            return "turnlens_no_key_facts"
        files = sql_list([str(self.facts_file(self.folder, unit)) for unit in self.facts])
        return f"read_parquet({files}, hive_partitioning = false)"

    @property
    def plan(self) -> int:
        """The version whose first pass (`.build-v<plan>/`) holds the whole store's identity."""
        assert self.index.plan is not None  # _write_plan wrote it, or the resumed build kept it
        return self.index.plan

    def passes(self, units_per_pass: int) -> list[list[int]]:
        """The units in batches of `units_per_pass`, a pass over the store each. DuckDB holds rows of every
        unit of a pass before it flushes them (121 units of 30M spans in one pass ran out of memory); a pass
        reads the segments the index names for its units' traces, so the passes read the store about once
        between them, not once each."""
        every = self.facts + self.units  # the key-fact units first: every unit's job waits for theirs
        return [every[at : at + units_per_pass] for at in range(0, len(every), units_per_pass)]


def _prepare_shuffle(
    run: _Run, units: list[int], facts: list[int], present: list[str], index: Manifest
) -> Shuffle:
    """An empty shuffle folder for the build's `units` and key-fact units (the passes write into it side by
    side)."""
    folder = run.folder / f".shuffle-v{run.version}"
    _remove_tree(folder)
    for kind in ("copies", "turns", "facts"):
        (folder / kind).mkdir(parents=True)
    return Shuffle(folder, units, facts, present, index, _chunk_lists(run, index))


def shuffle_pass(run: _Run, shuffle: Shuffle, units: list[int]) -> tuple[int, int]:
    """Writes the input files of `units` in one pass over the segments holding their traces, on `run`'s
    connection (which holds the whole store's identity: whole_store_identity or resumed_identity); returns
    how many segments it read and how many copies it wrote. Starts from nothing, so a pass run again (a
    retried Spark task) writes the same files. DuckDB's own flush threshold: a smaller one made the pass cost
    up to 2.5 times the CPU (many flushes of each thread's buffers) without lowering the peak."""
    for unit in units:
        for kind in ("copies", "turns"):
            _remove_tree(shuffle.folder / kind / f"unit={unit}")
    run.step("unit_inputs", params={"units": units})
    inputs = "select trace_id from turnlens_unit_inputs"
    holding = _segments_holding(run, shuffle.index, shuffle.chunk_lists, shuffle.present, inputs)
    [(copies,)] = run.step(
        "shuffle",
        {
            "files": _listed(run, shuffle.present, holding),
            "copies_dir": catalog.sql_string(str(shuffle.folder / "copies")),
            "turns_dir": catalog.sql_string(str(shuffle.folder / "turns")),
        },
    ).fetchall()
    run.step("next_units")
    for unit in units:  # a slice its hash gave no turn (a few large turns) reads zero-row files
        for kind in ("copies", "turns"):
            folder = shuffle.folder / kind / f"unit={unit}"
            if not folder.exists():  # not run.copy: nothing publishes these files
                folder.mkdir(parents=True)
                target = catalog.sql_string(str(folder / "empty.parquet"))
                files = _listed(run, shuffle.present, None)
                run.step(f"empty_unit_{kind}", {"files": files, "target": target})
    return len(shuffle.present if holding is None else holding), int(copies)


def _chunk_lists(run: _Run, index: Manifest) -> dict[int, list[str]]:
    """Each chunk of the trace -> segment index with its segments, sorted as its run numbers them."""
    return {
        chunk: sorted(
            file
            for file, _ in run.step(
                "indexed_segments", {"files": sql_list([str(run._chunk("segments", chunk))])}
            ).fetchall()
        )
        for chunk in index.chunks
    }


def _segments_holding(
    run: _Run, index: Manifest, chunk_lists: Mapping[int, list[str]], present: list[str], traces_query: str
) -> set[str] | None:
    """The present segments that can hold the traces `traces_query` returns: those the index's chunks name
    for them, and every segment the index does not know (received, or merged by compaction, since). None
    when a chunk has no run (an older turnlens wrote it): then only a scan of its file would tell."""
    if not all(index.chunk_run_file(chunk).exists() for chunk in index.chunks):
        return None
    traces = identity_index.hashes(run.con, traces_query)
    named = set().union(
        *(
            identity_index.chunk_files_of(index.chunk_run_file(chunk), chunk_lists[chunk], traces)
            for chunk in index.chunks
        )
    )
    known = set().union(*chunk_lists.values())
    return (named | (set(present) - known)) & set(present)


def _compute_bucket(
    run: _Run, values: dict[str, str], shuffle: Path, unit: int, held: tuple[str, ...] = ()
) -> None:
    """Recomputes the turns of one unit from its own files (`shuffle_pass`) and the key facts of other
    units' turns (values' kept_key_facts), and holds their rows for the partitions' files (`held`, by
    default every relation written from): a function of those files and of the roll-up cutoff alone."""
    copies = sql_list([str(shuffle / "copies" / f"unit={unit}" / "*.parquet")])
    turns = sql_list([str(shuffle / "turns" / f"unit={unit}" / "*.parquet")])
    run.step(
        "unit_job", {"copies_files": copies, "turns_files": turns, "kept_key_facts": values["kept_key_facts"]}
    )
    run.fresh_phase(
        "recompute", values | {"input_copies": f"read_parquet({copies}, hive_partitioning = false)"}
    )
    run.step("bucket_replaced_turns")
    run.hold(held or tuple(name for name in HELD_RECOMPUTED if name != "turnlens_replaced_turns"))


def _remove_tree(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)


def _join_slices(run: _Run, part: str, slices: int) -> None:
    """Concatenates the slices of a partition into its file (streamed: rows are moved, not recomputed)."""
    for table in TABLES:
        target = run.partition_file(table, part)
        pieces = [run.slice_file(target, slice_) for slice_ in range(slices)]
        select = run.steps["rolled_up_rows"].replace("{{files}}", sql_list([str(piece) for piece in pieces]))
        run.copy(select, target, IDENTITY_ORDER.get(table))
        for piece in pieces:
            piece.unlink()
    write_partition_rollups(run, part)


def _buckets(sizes: Mapping[str, int], bucket_spans: int) -> list[tuple[list[str], int]]:
    """Partitions grouped newest first into buckets of about `bucket_spans` stored copies, each with the
    number of slices it is computed in: a partition larger than that is a bucket of its own, computed a slice
    of its turns at a time, so that memory stays bounded whatever a partition holds."""
    buckets: list[tuple[list[str], int]] = []
    current: list[str] = []
    total = 0
    for part in sorted(sizes, reverse=True):
        if sizes[part] > bucket_spans:
            buckets.append(([part], math.ceil(sizes[part] / bucket_spans)))
            continue
        if current and total + sizes[part] > bucket_spans:
            buckets.append((current, 1))
            current, total = [], 0
        current.append(part)
        total += sizes[part]
    if current:
        buckets.append((current, 1))
    return buckets
