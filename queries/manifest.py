"""The derived state's manifest and the catalogue's reads of it.

A manifest, `DIR/derived/current.json`, names the live file of each partition of the derived state and what
its rows cover (queries/materialize.py writes it). Readers only need what is here: reading the manifest,
telling whether it was written under the store's current inputs, and creating the catalogue's views of the
files it names (derived/identity.sql, current.sql, snapshot.sql). The catalog (catalog.py) and the
materialiser both build on this module; it builds on neither.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from turnlens.kernel import layout
from turnlens.queries import registry, sqlfiles

DERIVED_DIR = layout.DERIVED_DIR
CURRENT_FILE = "current.json"
INDEX_DIR = "index"
FORMAT = 3  # the manifest's layout; another format is rebuilt, not read
DERIVED_SQL = sqlfiles.QUERIES_DIR / "derived"
BUILD_SQL = DERIVED_SQL / "steps" / "materialize.sql"
# the views the derived state holds; each has one row per turn or finer (session_id, turn_id)
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
TABLES = VIEWS + IDENTITY
# Rollups: per-partition sums a store-wide view adds up again instead of reading every turn's row. Each is
# the named macro (views/) over one partition's files of some tables, written beside them with the same
# version whenever those files are new (materialize.publish), so a partition's rollup is a function of its
# base files alone. A reader takes the rollups of the partitions no delta touches and sums the rows in force
# of the others itself (derived/snapshot.sql). rollup -> (the tables it sums, in the macro's argument order;
# the macro)
ROLLUPS: dict[str, tuple[tuple[str, ...], str]] = {
    "node_skew_minutes": (("turn_node_skew",), "node_skew_minutes_of"),
    "node_skew_histogram": (("turn_node_skew",), "node_skew_histogram_of"),
    "tool_observed": (("tool_claims", "side_effects", "divergences"), "tool_observed_of"),
    "untiered_candidates": (("side_effects",), "untiered_candidates_of"),
    "turn_minutes": (("turns", "cancel_acks"), "turn_minutes_of"),
    "finding_minutes": (("divergences",), "finding_minutes_of"),
}
REPLACED = "replaced_turns"  # a delta's list of the turns it replaces (its rows of them may be none)
# delta/<table>-v<N>.parquet: the rows of the turns refresh N recomputed, all partitions (one folder: the
# refresh fsyncs one directory)
DELTA_DIR = "delta"
# the store's catalogue: VIEWS read the partitions and the deltas
CATALOG_FILES = ("identity.sql", "current.sql", "snapshot.sql")
# of those, the files that only read the derived state's files: the rows written do not depend on them
READS_ONLY = ("current.sql", "snapshot.sql")
_STEP = re.compile(r"^-- step: (\w+)$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@dataclass(frozen=True)
class Manifest:
    """One version of the derived state: the live file of each partition, and what its rows cover.

    A partition's files are `<table>/p=<partition>/v<version>.parquet`, the version that last wrote it; the
    trace -> segment index is chunks `index/traces-v<N>.parquet` and `index/segments-v<N>.parquet`.
    """

    folder: Path  # DIR/derived
    version: int
    inputs_sha256: str
    watermark: int  # every copy received at or before it is in the partitions
    built_unix: float
    partitions: dict[str, int]  # partition -> version of its files
    chunks: list[int]  # versions of the index chunks
    template: int  # version of the zero-row file of each table
    partitions_total: int | None = None  # while a full build runs: the partitions it will write
    # while a full build runs: the version whose `.build-v<N>/` folder holds what its first pass computed
    # (each trace's turn, keys and links, each turn's unit, the buckets), which a later run resumes it from
    plan: int | None = None
    retiring: list[str] = field(default_factory=list)  # replaced files compaction has not yet taken
    # the deltas written since the partitions' base files, oldest first: {"version": N, "parts": the
    # partitions whose turns it replaced or wrote, "tables": the tables it holds rows of, "turns": the turns
    # it replaced}
    deltas: list[dict[str, Any]] = field(default_factory=list)
    # the runs of the partition index of the identity tables (identity_index.py), each {"version": N, "parts":
    # {partition: the version of its files the run was made from}}
    identity: list[dict[str, Any]] = field(default_factory=list)
    # the margin the run that wrote it left unread: copies received in the last `margin_s` seconds before it
    # started wait for a later run by design (turnlens_snapshot.margin_s, which PerTurnStateBehind allows for)
    margin_s: float = 0.0

    @property
    def complete(self) -> bool:
        return self.partitions_total is None

    @property
    def generation(self) -> str:
        return f"v{self.version}"

    def partition_file(self, table: str, part: str, version: int | None = None) -> Path:
        return partition_path(self.folder, table, part, self.partitions[part] if version is None else version)

    def template_file(self, table: str) -> Path:
        return self.folder / table / f"empty-v{self.template}.parquet"

    def table_files(self, table: str, parts: list[str] | None = None) -> list[str]:
        """The files holding a table's rows (of some partitions) and its zero-row file."""
        chosen = sorted(self.partitions) if parts is None else parts
        # str(partition_file(...)) by formatting: a catalogue names every partition's file of every table at
        # each new version, and building a Path per file was most of that (0.36 of 0.75 s at 720 partitions)
        folder = f"{self.folder}/{table}"
        files = [f"{folder}/p={part}/v{self.partitions[part]}.parquet" for part in chosen]
        return files + [str(self.template_file(table))]

    def unsettled_parts(self) -> set[str]:
        """The partitions a delta in force touches: their rows in force are their base file's less the turns a
        delta replaced, plus the deltas' rows, so their rollups (ROLLUPS) no longer add up to them."""
        return {part for delta in self.deltas for part in delta["parts"]}

    def settled_parts(self) -> list[str]:
        """The partitions with a base file that no delta in force touches: every row of them is in force."""
        return sorted(set(self.partitions) - self.unsettled_parts())

    def delta_file(self, table: str, version: int) -> Path:
        return self.folder / DELTA_DIR / f"{table}-v{version}.parquet"

    def delta_files(self, table: str) -> list[str]:
        """The delta files holding rows of a table, oldest first (REPLACED: every delta's replaced turns)."""
        return [
            str(self.delta_file(table, delta["version"]))
            for delta in self.deltas
            if table == REPLACED or table in delta["tables"]
        ]

    def parts(self) -> set[str]:
        """Every partition holding rows: those with a base file, and those only deltas wrote to so far."""
        return set(self.partitions) | {part for delta in self.deltas for part in delta["parts"]}

    def written_versions(self) -> dict[str, int]:
        """Each partition with the version that last wrote rows of it: its base file's, or a newer delta's."""
        versions = dict(self.partitions)
        for delta in self.deltas:
            versions |= dict.fromkeys(delta["parts"], delta["version"])
        return versions

    def current_values(self, table: str) -> dict[str, str]:
        """The file lists of derived/current.sql for one table."""
        template = str(self.template_file(table))
        unsettled = sorted(self.unsettled_parts() & set(self.partitions))
        return {
            "table": table,
            "settled_files": sql_list(read_order(self.table_files(table, self.settled_parts()), template)),
            "unsettled_files": sql_list(read_order(self.table_files(table, unsettled), template)),
            "delta_files": sql_list(read_order(self.delta_files(table), template)),
            "replaced_files": sql_list(
                read_order(self.delta_files(REPLACED), str(self.template_file("trace_turns")))
            ),
        }

    def identity_file(self, version: int) -> Path:
        """A run of the identity tables' partition index (identity_index.py)."""
        return self.folder / INDEX_DIR / f"identity-v{version}.npy"

    def chunk_run_file(self, chunk: int) -> Path:
        """The run (identity_index.py) of a chunk of the trace -> segment index: its traces by hash."""
        return self.folder / INDEX_DIR / f"traces-v{chunk}.npy"

    def chunk_files(self, kind: str) -> list[str]:
        return [str(self.folder / INDEX_DIR / f"{kind}-v{chunk}.parquet") for chunk in self.chunks]

    def files(self) -> set[str]:
        """Every file this version names."""
        named = {name for table in TABLES for name in self.table_files(table) + self.delta_files(table)}
        named |= set(self.delta_files(REPLACED))
        named |= {name for rollup in ROLLUPS for name in self.table_files(rollup)}  # laid out as tables
        named |= {str(self.identity_file(int(run["version"]))) for run in self.identity}
        # a chunk an older turnlens wrote has no run
        named |= {str(run) for run in map(self.chunk_run_file, self.chunks) if run.exists()}
        return named | set(self.chunk_files("traces")) | set(self.chunk_files("segments"))

    def to_json(self) -> dict[str, Any]:
        body = asdict(self)
        body.pop("folder")
        return {"format": FORMAT, **body}


def partition_path(folder: Path, table: str, part: str, version: int) -> Path:
    """A partition's file of a table (or rollup) in the derived state's folder, as a version wrote it."""
    return folder / table / f"p={part}" / f"v{version}.parquet"


def inputs_fingerprint(store_dir: Path) -> str:
    """What the derived rows depend on besides the spans: the tool registry (side_effects' tiers) and the SQL
    that defines the views. Derived state written under other inputs (an edited registry, a turnlens upgrade
    whose detectors or columns changed) is not read: the next run rebuilds it. The SQL of READS_ONLY is left
    out: an upgrade that changes only how the catalogue reads the files rewrites the catalogue (catalog.py),
    not 30 days of derived state."""
    digest = hashlib.sha256()
    registry_file = store_dir / registry.REGISTRY_FILE
    digest.update(registry_file.read_bytes() if registry_file.exists() else b"")
    digest.update(sqlfiles.sql_fingerprint(skip=[f"derived/{name}" for name in READS_ONLY]).encode())
    return digest.hexdigest()


def read_manifest(store_dir: Path) -> Manifest | None:
    """The manifest `current.json` holds, whatever inputs it was written under; None if absent or
    unreadable."""
    folder = store_dir / DERIVED_DIR
    try:
        body = json.loads((folder / CURRENT_FILE).read_text())
        if body.pop("format", None) != FORMAT:
            return None
        return Manifest(folder=folder, **body)
    except (FileNotFoundError, KeyError, TypeError, ValueError):
        return None


def current_snapshot(store_dir: Path) -> Manifest | None:
    """The derived state readers use: the current manifest, if written under the store's current inputs."""
    manifest = read_manifest(store_dir)
    if manifest is None or manifest.inputs_sha256 != inputs_fingerprint(store_dir):
        return None
    return manifest


def build_steps() -> dict[str, str]:
    """The statements of derived/steps/materialize.sql by step name."""
    return sections(BUILD_SQL.read_text(), _STEP)


def sections(text: str, marker: re.Pattern[str]) -> dict[str, str]:
    parts = marker.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def read_order(files: Iterable[str], zero_row: str) -> list[str]:
    """`files` in the order a Parquet read should list them: the largest first, the zero-row file that keeps a
    list non-empty last (every file of a list has the same columns, so the first one names them).

    DuckDB estimates a list of Parquet files at its first file's rows times their number. Led by a zero-row
    file, or by a partition with no rows of that table, a list is estimated at no rows, and every join with it
    builds its hash table on the list's side: the whole store's trace identity, or every turn of a derived
    table, where the other side is a few thousand replaced turns. At 10M spans that outgrew the materialiser's
    1 GB memory limit. Led by its largest file, a list is overestimated, never under."""

    def size(file: str) -> int:
        try:
            return os.stat(file).st_size
        except OSError:  # not written yet, or already gone: sorts last but for the zero-row file
            return 0

    return sorted(set(files) - {zero_row}, key=lambda file: (-size(file), file)) + [zero_row]


def sql_list(files: list[str]) -> str:
    """A list of strings as a SQL constant (DDL and table functions take no bound parameters)."""
    return "[" + ", ".join(sqlfiles.sql_string(name) for name in files) + "]::varchar[]"


def fill(sql: str, values: Mapping[str, str]) -> str:
    """Fills `{{name}}` placeholders with SQL text."""
    for name, value in values.items():
        sql = sql.replace("{{" + name + "}}", value)
    return sql


def lookup_files(manifest: Manifest, table: str) -> list[str]:
    """An identity table's files for the one-turn lookups of snapshot.sql: its base files and deltas (a
    superset they filter)."""
    return read_order(
        manifest.table_files(table) + manifest.delta_files(table), str(manifest.template_file(table))
    )


def rollup_values(manifest: Manifest) -> dict[str, str]:
    """snapshot.sql's file lists of the rollups, `<rollup>_rollup_files`: the rollups of the partitions no
    delta touches (a reader sums the rows in force of the others itself: `turnlens_unsettled_<table>`)."""
    settled = manifest.settled_parts()
    return {
        f"{rollup}_rollup_files": sql_list(
            read_order(manifest.table_files(rollup, settled), str(manifest.template_file(rollup)))
        )
        for rollup in ROLLUPS
    }


def reads_derived_state(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a catalogue's derived views read derived state (not their live definitions): CATALOG_FILES are
    applied to it, so their macros (one turn's lookups of the kept key facts among them) are defined. A look
    at the views takes a millisecond; one among every function, 30."""
    found = con.execute(
        "select count(*) from duckdb_views() where view_name = 'turnlens_current_turns' and not temporary"
    ).fetchone()
    return bool(found and found[0])


def apply_snapshot_sql(
    con: duckdb.DuckDBPyConnection, segments_glob: str, manifest: Manifest, values_only: bool = False
) -> None:
    """Creates the catalogue's reads of the derived state (CATALOG_FILES) on `con`; with `values_only`, on a
    catalogue that reads another version already, only what names the version's files and watermark."""
    listed = sqlfiles.read_order(DERIVED_SQL)
    lists: dict[str, dict[str, str]] = {}  # each table's file lists, built once for the three files
    values = {
        "segments": sqlfiles.sql_string(segments_glob),
        "watermark": str(int(manifest.watermark)),
        "generation": sqlfiles.sql_string(manifest.generation),
        "built": repr(float(manifest.built_unix)),
        "margin": repr(float(manifest.margin_s)),
        "partitions": str(len(manifest.parts())),
        "partitions_total": "null" if manifest.partitions_total is None else str(manifest.partitions_total),
        "complete": "true" if manifest.complete else "false",
        "index_traces_files": sql_list(manifest.chunk_files("traces")),
        "index_segments_files": sql_list(manifest.chunk_files("segments")),
        **{f"{table}_files": sql_list(lookup_files(manifest, table)) for table in IDENTITY},
        **rollup_values(manifest),
    }
    for name in CATALOG_FILES:
        if name not in listed:
            raise sqlfiles.CatalogError(f"{DERIVED_SQL / '_order'} does not list {name}")
        # the identity tables are read as files (above)
        apply_sql(con, name, values, manifest, VIEWS, values_only=values_only, lists=lists)


def apply_sql(
    con: duckdb.DuckDBPyConnection,
    name: str,
    values: Mapping[str, str],
    manifest: Manifest,
    tables: tuple[str, ...] = TABLES,
    temp: bool = False,
    values_only: bool = False,
    lists: dict[str, dict[str, str]] | None = None,
) -> None:
    """Runs one file of derived/ on `con`: a statement naming {{table}} once per table (with its file lists),
    one naming {{view}} once per view; `temp` makes its views and macros temporary (the materialiser's
    connection); `values_only` runs only the statements naming a value of the manifest (the others read
    those through the macros: they stay as they are). `lists` keeps each table's file lists for the next
    call on the same manifest: each names every partition's file, and stats it to order the list."""
    lists = {} if lists is None else lists

    def current_values(table: str) -> dict[str, str]:
        if table not in lists:
            lists[table] = manifest.current_values(table)
        return lists[table]

    for statement in sqlfiles.split_statements((DERIVED_SQL / name).read_text()):
        if values_only and not set(_PLACEHOLDER.findall(statement)) - {"table", "view"}:
            continue
        if temp:
            statement = statement.replace("create or replace view", "create or replace temp view")
            statement = statement.replace("create or replace macro", "create or replace temp macro")
        if "{{table}}" in statement:
            for table in tables:
                con.execute(fill(statement, {**values, **current_values(table)}))
        elif "{{view}}" in statement:
            for view in VIEWS:
                con.execute(fill(statement, {**values, "view": view}))
        else:
            con.execute(fill(statement, {**values, **current_values("trace_turns")}))


def apply_no_state(con: duckdb.DuckDBPyConnection) -> None:
    """turnlens_snapshot on a store without derived state: it says nothing is built (the views are live)."""
    for statement in sqlfiles.split_statements(build_steps()["no_state"]):
        con.execute(statement)
