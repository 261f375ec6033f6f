"""Materialises the per-turn catalogue views into a snapshot: reading them costs a file read, not detectors.

A snapshot is a folder `DIR/derived/gen-<watermark>/` of Parquet files: the rows of the per-turn views
(VIEWS: `turns`, `side_effects`, `divergences`, ..., and the parts `node_skew` and `tool_audit` add up), and
three side tables (each trace's turn, its idempotency keys, its links) that tell which turns a newer span
touches. It covers every stored copy received at or before its watermark. With a snapshot in place the
store's catalogue defines those views as reads of it (derived/snapshot.sql); their live form stays callable as
macros, e.g. `divergences_of('turn_events')`.

The first snapshot (or `--full`) recomputes every turn, a bucket of turns at a time so memory stays bounded.
Later ones refresh: the previous snapshot's rows for untouched turns, and the turns that copies received since
touched, recomputed from all their traces (derived/fresh.sql, derived/materialized.sql). `current.json` in
`DIR/derived` names the snapshot in use; the catalogue is rewritten to read it, and replaced snapshots leave
the disk after a grace period, as replaced segments do.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import time
from collections import defaultdict
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from turnlens.collector import compaction, segments
from turnlens.kernel import layout
from turnlens.queries import catalog, registry

DERIVED_DIR = layout.DERIVED_DIR
CURRENT_FILE = "current.json"
LOCK_FILE = ".lock"
DERIVED_SQL = catalog.QUERIES_DIR / "derived"
BUILD_SQL = DERIVED_SQL / "steps" / "materialize.sql"
# the views a snapshot holds, in the order they are written; each has one row per turn or finer (session_id,
# turn_id)
VIEWS = (
    "side_effects",
    "cancel_acks",
    "layer_verdicts",
    "divergences",
    "turn_usage",
    "turns",
    "turn_node_skew",
    "tool_claims",
)
IDENTITY = ("trace_turns", "trace_keys", "trace_links")
# what each side table is looked up by (one turn's named queries): written sorted on it in small row groups
IDENTITY_ORDER = {"trace_turns": "turn_id", "trace_keys": "idempotency_key", "trace_links": "trace_id"}
LOOKUP_ROW_GROUP = 8192
DEFAULT_MARGIN_S = 10.0  # a copy received this long before a snapshot started is durable in a segment by then
DEFAULT_BUCKET_SPANS = (
    1_000_000  # stored copies per bucket of a full build (~4-6 GB of DuckDB memory at most)
)
DEFAULT_REFRESH_LIMIT = 1_000_000  # fresh copies above which a refresh becomes a full build
# the fresh part's relations a snapshot run holds in memory, each computed once from those before it
HELD = (
    "turnlens_fresh_traces",
    "turnlens_trace_keys",
    "turnlens_trace_links",
    "turnlens_touched_traces",
    "turnlens_touched_turn_ids",
    "turnlens_fresh_input",
    "turnlens_fresh_spans",
    "turnlens_replaced_turns",
    "turnlens_fresh_events",
    "turnlens_fresh_side_effects",
    "turnlens_fresh_cancel_acks",
    "turnlens_fresh_divergences",
)
REFRESH_FILES = ("identity.sql", "fresh.sql", "materialized.sql")  # a refresh: snapshot plus fresh part
CATALOG_FILES = ("identity.sql", "snapshot.sql")  # the store's catalogue: VIEWS read the snapshot
GRACE_S = (
    300.0  # as compaction keeps replaced segments: a reader's open catalogue may still name the old snapshot
)

TIMINGS: dict[str, float] = defaultdict(float)  # seconds per step of the last materialize()
_STEP = re.compile(r"^-- step: (\w+)$", re.MULTILINE)


class MaterializeBusy(Exception):
    """Another process is writing a snapshot of this store."""


@dataclass(frozen=True)
class Snapshot:
    """The snapshot a store's catalogue reads: its folder and the received_unix_nano it covers."""

    folder: Path
    watermark: int
    inputs_sha256: str
    built_unix: float = 0.0


def inputs_fingerprint(store_dir: Path) -> str:
    """What a snapshot's rows depend on besides the spans: the tool registry (side_effects' tiers) and the SQL
    that defines the views. A snapshot written under other inputs (an edited registry, a turnlens upgrade
    whose detectors or columns changed) is not used: the views are live until the next (full) snapshot."""
    digest = hashlib.sha256()
    registry_file = store_dir / registry.REGISTRY_FILE
    digest.update(registry_file.read_bytes() if registry_file.exists() else b"")
    for folder in (*catalog.VIEW_FOLDERS, "derived"):
        for path in sorted((catalog.QUERIES_DIR / folder).rglob("*.sql")):
            name = path.relative_to(catalog.QUERIES_DIR).as_posix()
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def current_snapshot(store_dir: Path) -> Snapshot | None:
    """The snapshot `current.json` names, if it is whole and was written under the store's current tool
    registry."""
    try:
        manifest = json.loads((store_dir / DERIVED_DIR / CURRENT_FILE).read_text())
        snapshot = Snapshot(
            folder=store_dir / DERIVED_DIR / manifest["generation"],
            watermark=int(manifest["watermark_unix_nano"]),
            inputs_sha256=str(manifest["inputs_sha256"]),
            built_unix=float(manifest["built_unix"]),
        )
    except (FileNotFoundError, KeyError, ValueError):
        return None
    if snapshot.inputs_sha256 != inputs_fingerprint(store_dir) or not snapshot.folder.is_dir():
        return None
    return snapshot


def build_steps() -> dict[str, str]:
    """The statements of derived/steps/materialize.sql by step name."""
    text = BUILD_SQL.read_text()
    parts = _STEP.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def render_derived(sql: str, segments_glob: str, snapshot: Snapshot) -> str:
    """A derived SQL file with the store's locations and the snapshot's watermark filled in (DDL binds
    nothing)."""
    return (
        sql.replace("{{segments}}", catalog.sql_string(segments_glob))
        .replace("{{derived}}", catalog.sql_string(str(snapshot.folder.resolve())))
        .replace("{{watermark}}", str(int(snapshot.watermark)))
        .replace("{{generation}}", catalog.sql_string(snapshot.folder.name))
        .replace("{{built}}", repr(float(snapshot.built_unix)))
    )


def apply_derived(
    con: duckdb.DuckDBPyConnection, segments_glob: str, snapshot: Snapshot, files: tuple[str, ...]
) -> None:
    """Runs files of derived/ (REFRESH_FILES in the materialiser, CATALOG_FILES in the store's catalogue)."""
    listed = catalog.read_order(DERIVED_SQL)
    for name in files:
        if name not in listed:
            raise catalog.CatalogError(f"{DERIVED_SQL / '_order'} does not list {name}")
        for statement in catalog.split_statements((DERIVED_SQL / name).read_text()):
            # a statement naming {{view}} is one definition for every materialised view
            for view in VIEWS if "{{view}}" in statement else ("",):
                con.execute(render_derived(statement, segments_glob, snapshot).replace("{{view}}", view))


def _lock(store_dir: Path) -> AbstractContextManager[None]:
    """The store's snapshot lock: one materialiser at a time, refused at once when another holds it."""
    folder = store_dir / DERIVED_DIR
    folder.mkdir(parents=True, exist_ok=True)
    busy = MaterializeBusy(f"another process is materialising {store_dir}")
    return compaction.exclusive_lock(folder / LOCK_FILE, 0.0, busy)


def _copy(
    con: duckdb.DuckDBPyConnection,
    select: str,
    target: Path,
    params: Mapping[str, Any] | None = None,
    order_by: str | None = None,
) -> int:
    """Writes a query's rows to one Parquet file (sorted, in small row groups, when `order_by` names the
    column a lookup filters on, so the lookup reads one row group); returns the row count."""
    started = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    query = select.rstrip().rstrip(";")
    if order_by:
        query = f"select * from ({query}) order by {order_by}"
    statement = (
        f"copy ({query}) to {catalog.sql_string(str(target))}"
        f" (format parquet, compression zstd, row_group_size {LOOKUP_ROW_GROUP if order_by else 122_880})"
    )
    con.execute(statement, dict(params or {}))
    [(rows,)] = con.execute(
        f"select count(*) from read_parquet({catalog.sql_string(str(target))})"
    ).fetchall()
    TIMINGS[target.name if target.parent.name.startswith(".gen") else target.parent.name] += (
        time.perf_counter() - started
    )
    return int(rows)


def _hold_fresh_part(con: duckdb.DuckDBPyConnection, steps: dict[str, str], *, turns: bool) -> None:
    """Computes the fresh part's relations once each (HELD, in order), for the views written from them."""
    for name in HELD:
        if name == "turnlens_replaced_turns" and not turns:
            continue  # a full build's bucket names its turns itself
        started = time.perf_counter()
        for statement in catalog.split_statements(steps["hold"].replace("{{name}}", name)):
            con.execute(statement)
        TIMINGS[f"hold {name}"] += time.perf_counter() - started


def _write_views(
    con: duckdb.DuckDBPyConnection, steps: dict[str, str], folder: Path, part: str, step: str
) -> dict[str, int]:
    """Writes each materialised view's rows as one part: the refresh's views (`view_rows`) or a full build
    bucket's fresh part (`bucket_view_rows`)."""
    return {
        view: _copy(con, steps[step].replace("{{view}}", view), folder / view / f"{part}.parquet")
        for view in VIEWS
    }


def _connect(store_dir: Path, segments_glob: str, threads: int | None, memory_limit: str | None) -> Any:
    con = duckdb.connect()
    if threads:
        con.execute(f"set threads = {int(threads)}")  # SET binds no parameters
    if memory_limit:
        con.execute(f"set memory_limit = {catalog.sql_string(memory_limit)}")
    con.execute("set preserve_insertion_order = false")
    con.execute("set parquet_metadata_cache = true")  # every view binds span_copies() and reads its footers
    catalog.apply_tables(con, store_dir)
    catalog.apply_views(con, segments_glob, catalog.load_views())
    return con


def materialize(
    store_dir: Path,
    segments_glob: str,
    *,
    full: bool = False,
    margin_s: float = DEFAULT_MARGIN_S,
    bucket_spans: int = DEFAULT_BUCKET_SPANS,
    refresh_limit: int = DEFAULT_REFRESH_LIMIT,
    threads: int | None = None,
    memory_limit: str | None = None,
    now_ns: int | None = None,
) -> dict[str, Any]:
    """Writes the next snapshot of the store, makes it current and rewrites the catalogue to read it.

    Returns what it did: mode (full / refresh), watermark, rows per table, buckets, seconds.
    Raises MaterializeBusy when another process holds the store's snapshot lock.
    """
    started = time.perf_counter()
    TIMINGS.clear()
    watermark = (now_ns if now_ns is not None else time.time_ns()) - int(margin_s * 1e9)
    steps = build_steps()
    with _lock(store_dir):
        previous = current_snapshot(store_dir)
        con = _connect(store_dir, segments_glob, threads, memory_limit)
        try:
            generation = f"gen-{watermark}"
            tmp = store_dir / DERIVED_DIR / f".{generation}.{os.getpid()}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            fresh = None
            if previous is not None and not full and not _lost_copies(con, steps, store_dir, previous):
                [(fresh,)] = con.execute(steps["count_fresh"], {"watermark": previous.watermark}).fetchall()
            if previous is not None and fresh is not None and fresh <= refresh_limit:
                summary = _refresh(con, steps, segments_glob, previous, tmp)
            else:
                summary = _full_build(con, steps, segments_glob, tmp, bucket_spans)
            [(covered,)] = con.execute(steps["count_covered"], {"watermark": watermark}).fetchall()
        finally:
            con.close()
        final = store_dir / DERIVED_DIR / generation
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        manifest: dict[str, Any] = {
            "generation": generation,
            "watermark_unix_nano": watermark,
            "inputs_sha256": inputs_fingerprint(store_dir),
            "built_unix": time.time(),
            "fresh_copies": fresh,
            "covered_copies": int(covered),
            **summary,
        }
        current = store_dir / DERIVED_DIR / CURRENT_FILE
        tmp_current = current.with_name(f".{CURRENT_FILE}.{os.getpid()}.tmp")
        tmp_current.write_text(json.dumps(manifest, indent=2) + "\n")
        os.replace(tmp_current, current)
        catalog.write_catalog(store_dir, segments_glob)
        manifest["removed_generations"] = remove_old_generations(store_dir, keep={generation})
    manifest["seconds"] = round(time.perf_counter() - started, 3)
    manifest["step_seconds"] = {name: round(seconds, 3) for name, seconds in TIMINGS.items()}
    return manifest


def _lost_copies(
    con: duckdb.DuckDBPyConnection, steps: dict[str, str], store_dir: Path, previous: Snapshot
) -> bool:
    """Whether copies the previous snapshot covered are gone (retention dropped them): its rows would keep
    turns whose spans no longer exist, so the next snapshot is a full build."""
    manifest = json.loads((store_dir / DERIVED_DIR / CURRENT_FILE).read_text())
    [(covered,)] = con.execute(steps["count_covered"], {"watermark": previous.watermark}).fetchall()
    return int(covered) < int(manifest.get("covered_copies", 0))


def _refresh(
    con: duckdb.DuckDBPyConnection, steps: dict[str, str], segments_glob: str, previous: Snapshot, tmp: Path
) -> dict[str, Any]:
    """The current views (the previous snapshot plus the recomputed touched turns), written as the next
    snapshot."""
    apply_derived(con, segments_glob, previous, REFRESH_FILES)
    _hold_fresh_part(con, steps, turns=True)
    rows = {
        name: _copy(con, steps[f"refresh_{name}"], tmp / f"{name}.parquet", order_by=IDENTITY_ORDER[name])
        for name in IDENTITY
    }
    rows["trace_files"] = _write_file_index(con, steps, segments_glob, tmp, previous)
    rows |= _write_views(con, steps, tmp, "part-00000", "view_rows")
    [(touched,)] = con.execute(steps["count_replaced"]).fetchall()
    return {"mode": "refresh", "rows": rows, "touched_turns": int(touched), "buckets": 1}


def _full_build(
    con: duckdb.DuckDBPyConnection, steps: dict[str, str], segments_glob: str, tmp: Path, bucket_spans: int
) -> dict[str, Any]:
    """Every turn recomputed: the identity tables over the whole store, then the views a bucket of turns
    at a time."""
    con.execute(steps["all_copies"])
    apply_derived(
        con, segments_glob, Snapshot(folder=tmp, watermark=0, inputs_sha256=""), files=("identity.sql",)
    )
    rows = {
        name: _copy(con, steps[f"full_{name}"], tmp / f"{name}.parquet", order_by=IDENTITY_ORDER[name])
        for name in IDENTITY
    }
    rows["trace_files"] = _write_file_index(con, steps, segments_glob, tmp, None)
    [(copies,)] = con.execute(steps["count_copies"]).fetchall()
    buckets = max(1, math.ceil(int(copies) / bucket_spans))
    building = Snapshot(folder=tmp, watermark=0, inputs_sha256="")
    apply_derived(con, segments_glob, building, files=("fresh.sql",))
    con.execute(steps["buckets"], {"buckets": buckets})
    view_rows = dict.fromkeys(VIEWS, 0)
    for bucket in range(buckets):
        con.execute(steps["seed_bucket"], {"bucket": bucket})
        apply_derived(
            con, segments_glob, building, files=("fresh.sql",)
        )  # the held views of the last bucket go
        for statement in catalog.split_statements(steps["seeded_fresh_traces"]):
            con.execute(render_derived(statement, segments_glob, building))
        con.execute(steps["bucket_turns"], {"bucket": bucket})
        con.execute(steps["use_bucket_turns"])
        _hold_fresh_part(con, steps, turns=False)
        for view, count in _write_views(con, steps, tmp, f"part-{bucket:05d}", "bucket_view_rows").items():
            view_rows[view] += count
    return {"mode": "full", "rows": rows | view_rows, "buckets": buckets, "copies": int(copies)}


def _write_file_index(
    con: duckdb.DuckDBPyConnection,
    steps: dict[str, str],
    segments_glob: str,
    tmp: Path,
    previous: Snapshot | None,
) -> int:
    """The trace -> segment index by which one turn's spans_in opens its segments (turn_files_of), and the
    segments it covers. A refresh keeps the previous index for segments still present and reads only those
    it did not know; the placeholder is never indexed, so a turn's list of segments is never empty."""
    present = [file for (file,) in con.execute(steps["present_files"], {"glob": segments_glob}).fetchall()]
    placeholder = str(Path(segments_glob).parent.parent / segments.PLACEHOLDER)
    target = tmp / "trace_files.parquet"
    if previous is None:
        rows = _copy(con, steps["full_trace_files"], target, order_by="trace_id")
    else:
        [(indexed,)] = con.execute(render_derived(steps["indexed_files"], segments_glob, previous)).fetchall()
        new = sorted(set(present) - set(indexed or []) | {placeholder})
        listed = (
            "[" + ", ".join(catalog.sql_string(file) for file in new) + "]"
        )  # a table function's constant
        select = render_derived(steps["refresh_trace_files"], segments_glob, previous).replace("$new", listed)
        rows = _copy(con, select, target, order_by="trace_id")
    _copy(
        con,
        steps["indexed_files_of"],
        tmp / "indexed_files.parquet",
        {"files": [file for file in present if file != placeholder]},
    )
    return rows


def remove_old_generations(store_dir: Path, keep: set[str], grace_s: float = GRACE_S) -> list[str]:
    """Deletes snapshot folders other than `keep` once they have been replaced for longer than the grace
    period."""
    removed = []
    now = time.time()
    for folder in sorted((store_dir / DERIVED_DIR).glob("gen-*")):
        if folder.name in keep or now - folder.stat().st_mtime < grace_s:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    for stale in (store_dir / DERIVED_DIR).glob(".gen-*.tmp"):  # a build that died
        if now - stale.stat().st_mtime > grace_s:
            shutil.rmtree(stale, ignore_errors=True)
    return removed
