"""Loads the SQL files in their written order, documents them, and writes the store's DuckDB catalog.

The catalog file `DIR/turnlens.duckdb` holds only views (over the store's Parquet segments), so it is
small and rewritten whole: built under a temporary name and renamed into place, which never disturbs
a reader that has the old file open. Several processes write it (every collector when it starts, the
materialiser after each version of the derived state): one at a time, under a lock file, each reading the
derived state's current manifest inside the lock, so the catalogue renamed last never names an older version
than the one already published.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
from turnlens.collector import compaction, leases, quarantine, segments
from turnlens.kernel import layout, schema
from turnlens.queries import manifest as derived_manifest
from turnlens.queries import registry, settings, turn_queries
from turnlens.queries.sqlfiles import QUERIES_DIR as QUERIES_DIR
from turnlens.queries.sqlfiles import TABLE_FOLDER as TABLE_FOLDER
from turnlens.queries.sqlfiles import VIEW_FOLDERS as VIEW_FOLDERS
from turnlens.queries.sqlfiles import CatalogError as CatalogError
from turnlens.queries.sqlfiles import SqlView as SqlView
from turnlens.queries.sqlfiles import execute_script as execute_script
from turnlens.queries.sqlfiles import load_tables as load_tables
from turnlens.queries.sqlfiles import load_views as load_views
from turnlens.queries.sqlfiles import moved_file as moved_file
from turnlens.queries.sqlfiles import params_of as _params_of  # noqa: F401  (materialize.py reads it here)
from turnlens.queries.sqlfiles import parse_view as parse_view
from turnlens.queries.sqlfiles import read_order as read_order
from turnlens.queries.sqlfiles import retrying as retrying
from turnlens.queries.sqlfiles import split_statements as split_statements
from turnlens.queries.sqlfiles import sql_fingerprint as sql_fingerprint
from turnlens.queries.sqlfiles import sql_string as sql_string
from turnlens.queries.sqlfiles import unbound_view

T = TypeVar("T")

CATALOG_FILE = layout.CATALOG_FILE
CATALOG_LOCK = f".{CATALOG_FILE}.lock"  # held while the catalogue is written (an flock: see docs/store.md)
CATALOG_LOCK_WAIT_S = 120.0  # a whole catalogue binds every view: seconds, more on a loaded machine
NAMED_FOLDER = "named"
TURN_PARAMS = {"session": "the session_id.", "turn": "the turn_id."}
# old names of named queries, kept working: old name -> the name it is now
NAMED_ALIASES = {
    "turn_timeline_of": "timeline_of_turn",
    "ledger_of_turn": "side_effects_of_turn",
    "cancel_of_turn": "cancel_acks_of_turn",
}

_PARAM_DOC = re.compile(r"^--\s{2,}\$(\w+):\s*(.+)$")


@dataclass(frozen=True)
class NamedQuery:
    """A parameterised query an analyst or the dashboard runs by name: `turnlens query NAME --param k=v`.

    `turn` names the query of `queries/turn/` a `NAME_of_turn` query runs over the turn it is given.
    """

    name: str
    title: str
    sql: str
    params: dict[str, str] = field(default_factory=dict)
    turn: str | None = None


def load_named(queries_dir: Path = QUERIES_DIR) -> dict[str, NamedQuery]:
    """Every named query: the files of `named/` (the first comment line is the title, `--   $param: meaning`
    its parameters), and `NAME_of_turn` for every query of `queries/turn/`, taking a session and a turn."""
    named = {}
    for path in sorted((queries_dir / NAMED_FOLDER).glob("*.sql")):
        sql = path.read_text()
        header = [line for line in sql.splitlines() if line.startswith("--")]
        if not header:
            raise CatalogError(f"{path} has no header comment saying what it returns")
        params = {}
        for line in header[1:]:
            doc = _PARAM_DOC.match(line)
            if doc:
                params[doc.group(1)] = doc.group(2).strip()
        body = "\n".join(ln for ln in sql.splitlines() if not ln.startswith("--"))
        used = set(re.findall(r"\$(\w+)", body))
        if used != set(params):
            raise CatalogError(f"{path}: parameters used {sorted(used)} but documented {sorted(params)}")
        named[path.stem] = NamedQuery(path.stem, header[0].removeprefix("--").strip(), sql, params)
    for query in turn_queries.load(queries_dir / "turn").values():
        name = f"{query.name}_of_turn"
        if name in named:
            raise CatalogError(f"{name} is both a file of named/ and a query of turn/")
        named[name] = NamedQuery(name, query.title, query.sql, dict(TURN_PARAMS), turn=query.name)
    for old, new in NAMED_ALIASES.items():
        named[old] = replace(named[new], name=old, title=f"the old name of {new}: {named[new].title}")
    return named


def run_named(
    con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any], queries_dir: Path = QUERIES_DIR
) -> duckdb.DuckDBPyConnection:
    """Runs a named query with its parameters bound; the caller fetches (fetchall, df, to_arrow_table).

    A `NAME_of_turn` query first holds the turn on `con` (turn_queries.hold), then runs over it.
    """
    queries = load_named(queries_dir)
    if name not in queries:
        raise CatalogError(f"no named query {name!r}; known: {', '.join(sorted(queries))}")
    query = queries[name]
    missing = sorted(set(query.params) - set(params))
    unknown = sorted(set(params) - set(query.params))
    if missing or unknown:
        raise CatalogError(f"{name} takes {sorted(query.params)}; missing {missing}, unknown {unknown}")
    if query.turn is not None:
        held = turn_queries.load(queries_dir / "turn")[query.turn]
        turn_queries.hold(con, [str(params["session"])], [str(params["turn"])], keys=held.needs_keys)
        return turn_queries.execute(con, query.sql, queries_dir / "turn")
    return execute_script(con, query.sql, params)


def read_view(con: duckdb.DuckDBPyConnection, name: str) -> duckdb.DuckDBPyRelation:
    """Every row of one catalogue view, as a lazy relation (`.to_arrow_table()`, `.df()`, `.fetchall()`)."""
    names = {view.name for view in load_views()}
    if name not in names:
        raise CatalogError(f"no view {name!r}; known: {', '.join(sorted(names))}")
    return con.sql(f"select * from {name}")  # an identifier checked against the catalogue, not a value


def describe_views(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str, str, str]]:
    """(view, grain, column, type, meaning) for every turnlens view, as the SQL console lists them."""
    names = [view.name for view in load_views()]
    return [
        (row[0], row[1] or "", row[2], row[3], row[4] or "")
        for row in con.execute(
            """
            select v.view_name, v.comment, c.column_name, c.data_type, c.comment
            from duckdb_views() as v
            join duckdb_columns() as c on c.table_name = v.view_name and c.schema_name = v.schema_name
            where v.view_name in (select unnest($names))
            order by list_position($names, v.view_name), c.column_index
            """,
            {"names": names},
        ).fetchall()
    ]


VIEWS_PAGE = "docs/views.md"
VIEWS_PAGE_COMMAND = "make docs"


def views_markdown(rows: list[tuple[str, str, str, str, str]]) -> str:
    """The views' reference page (docs/views.md) from `describe_views` rows: grain and columns of each."""
    by_view: dict[str, tuple[str, list[tuple[str, str, str]]]] = {}
    for view, grain, column, type_, meaning in rows:
        # the grain opens with the view's own name ("turns: one row per turn ..."), which the heading says
        grain = grain.removeprefix(f"{view}: ")
        by_view.setdefault(view, (grain[:1].upper() + grain[1:], []))[1].append((column, type_, meaning))
    lines = [
        "# Views",
        "",
        f"<!-- Generated by `{VIEWS_PAGE_COMMAND}` (`turnlens views --markdown`) from the comments of the SQL"
        " files in queries/base/ and queries/views/. Edit those comments, not this page. -->",
        "",
        "Every view of a store's catalog (`DIR/turnlens.duckdb`), in creation order: the base views over the",
        "segments first, then the analytic views built on them. The same text is in DuckDB itself",
        "(`COMMENT ON` each view and column: `select * from duckdb_columns() where comment is not null`),",
        "and `turnlens views [VIEW]` prints it. Types are those of a catalog built on an empty store.",
        "",
    ]
    lines += [f"- [`{view}`](#{view}): {_cell(grain)}" for view, (grain, _) in by_view.items()]
    for view, (grain, columns) in by_view.items():
        lines += ["", f"## {view}", "", _cell(grain), "", "| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{column}` | {_cell(type_)} | {_cell(meaning)} |" for column, type_, meaning in columns]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text that stays inside one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def render(view: SqlView, segments_glob: str) -> str:
    """The view's SQL with the store's segment location (and its quarantine log) filled in."""
    log = quarantine.log_path(Path(segments_glob).parent.parent)  # the glob is segments/*/*.parquet
    sql = view.sql.replace("{{quarantine_log}}", sql_string(str(log)))
    return sql.replace("{{segments}}", sql_string(segments_glob))


def apply_views(con: duckdb.DuckDBPyConnection, segments_glob: str, views: list[SqlView]) -> None:
    """Creates every view on `con` and attaches its documentation as COMMENT ON."""
    for view in views:
        con.execute(render(view, segments_glob))
        comment_view(con, view)


def live_connection(store_dir: Path, queries_dir: Path = QUERIES_DIR) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with the store's tables and every view computed from its segments, none read
    from derived state: what a catalogue answers before its first snapshot (the tests compare the derived
    state with it; bench/dashboard.py times it). The views are created unbound and undocumented (DuckDB binds
    each where a query reads it): binding and commenting them all would cost ~1.4 s a connection."""
    con = duckdb.connect()
    apply_tables(con, store_dir, queries_dir)
    glob = layout.segments_glob(store_dir)
    for view in load_views(queries_dir):
        con.execute(unbound_view(render(view, glob)))
    return con


def comment_view(con: duckdb.DuckDBPyConnection, view: SqlView) -> None:
    """Attaches a view's grain and column meanings as COMMENT ON (again when a snapshot view replaces it)."""
    con.execute(f"comment on view {view.name} is {sql_string(view.grain)}")
    # the columns the view's catalogue entry lists: `describe` bound the view's query again (40 ms a view,
    # 1.1 s of every catalogue's 1.2 s of comments)
    actual = {
        column
        for (column,) in con.execute(
            "select column_name from duckdb_columns() where database_name = current_database()"
            " and schema_name = current_schema() and table_name = ?",
            [view.name],
        ).fetchall()
    }
    for column, doc in view.columns.items():
        if column in actual:
            con.execute(f"comment on column {view.name}.{column} is {sql_string(doc)}")


def apply_tables(con: duckdb.DuckDBPyConnection, store_dir: Path, queries_dir: Path = QUERIES_DIR) -> None:
    """Creates the settings and tool-registry tables (settings.toml, environment, tool_registry.toml)."""
    values = settings.resolve(store_dir)
    settings_rows = pa.table(
        {
            "name": [s.name for s in settings.SETTINGS],
            "value": [values[s.name] for s in settings.SETTINGS],
            "unit": [s.unit for s in settings.SETTINGS],
            "description": [s.description for s in settings.SETTINGS],
        }
    )
    registry_rows = registry.registry_table(registry.load_registry(store_dir / registry.REGISTRY_FILE))
    con.register("settings_rows", settings_rows)
    con.register("registry_rows", registry_rows)
    try:
        for table in load_tables(queries_dir):
            con.execute(table.sql)
            con.execute(f"comment on table {table.name} is {sql_string(table.grain)}")
            for column, doc in table.columns.items():
                con.execute(f"comment on column {table.name}.{column} is {sql_string(doc)}")
    finally:
        con.unregister("settings_rows")
        con.unregister("registry_rows")


# The catalog is written in the storage format of DuckDB 1.5, not the newest the library knows, so the
# DuckDB command-line tool an analyst installs from PyPI (`duckdb-cli`, a release behind) can open it too.
CATALOG_STORAGE_VERSION = "v1.5.0"


def write_catalog(store_dir: Path, segments_glob: str, queries_dir: Path = QUERIES_DIR) -> Path:
    """Builds `store_dir/turnlens.duckdb` under a temporary name and renames it into place.

    Settings and the tool registry are read from the store folder here, so a change to either takes
    effect the next time the catalog is written (`turnlens views --store DIR --rebuild`). The files its views
    read are named by absolute paths, whatever folder `store_dir` is relative to: readers open it from theirs.
    """
    store_dir = store_dir.resolve()
    store_dir.mkdir(parents=True, exist_ok=True)
    leases.ensure_lock_file(store_dir)
    quarantine.ensure_log(Path(segments_glob).parent.parent)  # quarantined_segments reads it
    # binding the views reads every segment's footer (under a reader lease): an unreadable segment is
    # quarantined, and the catalog written again
    with leases.reading(store_dir), _catalog_lock(store_dir):
        return quarantine.retrying(store_dir, lambda: _write_catalog(store_dir, segments_glob, queries_dir))


def _catalog_lock(store_dir: Path) -> AbstractContextManager[None]:
    """One catalogue writer at a time. Without it, a collector starting (seconds to bind every view, reading
    the derived state's manifest first) could rename its catalogue over the one a materialiser wrote for a
    newer version meanwhile, and readers would be sent to files already handed to deletion."""
    busy = CatalogError(
        f"another process kept the catalogue of {store_dir} locked for {CATALOG_LOCK_WAIT_S:.0f} s"
    )
    return compaction.exclusive_lock(store_dir / CATALOG_LOCK, CATALOG_LOCK_WAIT_S, busy)


def _tmp_catalog(store_dir: Path) -> Path:
    """Where this process builds a catalogue: named by host and process, as several machines may write one."""
    return store_dir / f".{CATALOG_FILE}.{segments.host_tag()}.{os.getpid()}.tmp"


def _write_catalog(store_dir: Path, segments_glob: str, queries_dir: Path) -> Path:
    target = store_dir / CATALOG_FILE
    remove_stale_tmp(store_dir)
    tmp = _tmp_catalog(store_dir)
    tmp.unlink(missing_ok=True)
    views = load_views(queries_dir)
    base = [view for view in views if view.path.parent.name == "base"]
    key = _views_key(views, queries_dir)
    manifest = derived_manifest.current_snapshot(store_dir)
    bound = _start_from_bound_views(tmp, target, key, [view.name for view in views], manifest is not None)
    con = duckdb.connect(str(tmp), config={"storage_compatibility_version": CATALOG_STORAGE_VERSION})
    con.execute("set parquet_metadata_cache = true")  # binding each view reads the segments' footers
    try:
        con.execute("begin")  # one transaction: each COMMENT ON alone would be a commit of its own
        apply_tables(con, store_dir, queries_dir)
        record_store(con, store_dir, key)
        # the base views name this store's files: bound here each time (binding them is also what finds a
        # segment to quarantine). The views built on them read only the base views' columns, the same for
        # every store (the segment schema's): bound once (~1.4 s), then copied with the file
        apply_views(con, segments_glob, base)
        if not bound:
            apply_views(con, segments_glob, views[len(base) :])
            con.execute("commit")
            con.execute("checkpoint")
            _VIEWS_TEMPLATES[key] = tmp.read_bytes()
            con.execute("begin")
        apply_snapshot(con, segments_glob, views, manifest)
        con.execute("commit")
        con.execute("checkpoint")
    except BaseException:
        con.close()
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
        raise
    con.close()
    Path(f"{tmp}.wal").unlink(missing_ok=True)
    os.replace(tmp, target)
    return target


# A catalogue file with every view bound and no derived state, by the SQL it was written from (_views_key):
# what the next catalogue this process writes starts from (a test session writes hundreds of catalogues).
_VIEWS_TEMPLATES: dict[str, bytes] = {}


def _start_from_bound_views(tmp: Path, target: Path, key: str, names: list[str], with_snapshot: bool) -> bool:
    """Starts the catalogue at `tmp` from views already bound from the same SQL (`key`), if there are: this
    process's first catalogue of it, else the store's catalogue in place (a collector starting, an ingest,
    the first derived state) when it recorded the same key, holds every view `names` lists, and its derived
    views are the live ones or will be replaced by derived state again. False when there are none: `tmp` is
    absent."""
    template = _VIEWS_TEMPLATES.get(key)
    if template is not None:
        tmp.write_bytes(template)
        return True
    usable = False
    try:
        shutil.copyfile(target, tmp)  # replaced by rename, never changed in place: a whole file
        with duckdb.connect(str(tmp), read_only=True) as con:
            present = {name for (name,) in con.execute("select view_name from duckdb_views()").fetchall()}
            usable = (
                _store_row(con).get("views_sha256") == key
                and present.issuperset(names)
                and (with_snapshot or not derived_manifest.reads_derived_state(con))
            )
    except (OSError, duckdb.Error):  # none in place, or one that cannot be opened: every view is bound
        usable = False
    if not usable:
        tmp.unlink(missing_ok=True)
    return usable


def _views_key(views: list[SqlView], queries_dir: Path) -> str:
    """What a catalogue's views are bound from: their SQL and the tables', the segments' columns, and the
    DuckDB version and file format; and the derived state's SQL (sql_fingerprint), so that a catalogue in
    place holds nothing of another version's reads of the derived state."""
    digest = hashlib.sha256(
        f"{duckdb.__version__}\0{CATALOG_STORAGE_VERSION}\0{schema.SEGMENT_SCHEMA}\0{sql_fingerprint()}\0".encode()
    )
    for sql_file in (*views, *load_tables(queries_dir)):
        digest.update(sql_file.path.name.encode() + b"\0" + sql_file.sql.encode() + b"\0")
    return digest.hexdigest()


def update_derived(store_dir: Path, segments_glob: str, queries_dir: Path = QUERIES_DIR) -> Path:
    """Rewrites the catalogue for a new version of the derived state: a copy of the current catalogue in which
    only what names the version's files and watermark is replaced (the macros the derived views call, and
    turnlens_snapshot: nothing is bound again), renamed into place as write_catalog does. A whole catalogue is
    written instead when there is none to copy, or the one in place was written for another folder, from other
    SQL, with other settings or tool registry, or without derived state (its derived views are the live
    ones)."""
    target = store_dir / CATALOG_FILE
    if target.exists():
        with _catalog_lock(store_dir):
            if _update_copy(store_dir, segments_glob):
                return target
    return write_catalog(store_dir, segments_glob, queries_dir)


def _update_copy(store_dir: Path, segments_glob: str) -> bool:
    """update_derived's copy, under the catalogue lock; False (nothing changed) when a whole one is needed."""
    manifest = derived_manifest.current_snapshot(store_dir)
    if manifest is None:
        return False
    target = store_dir / CATALOG_FILE
    remove_stale_tmp(store_dir)  # a materialiser killed while it wrote its copy: the next one clears it
    tmp = _tmp_catalog(store_dir)
    tmp.unlink(missing_ok=True)
    reusable = False
    try:
        shutil.copyfile(target, tmp)
        con = duckdb.connect(str(tmp))
        try:
            reusable = _recorded(con) == store_record(store_dir) and derived_manifest.reads_derived_state(con)
            if reusable:
                con.execute("begin")
                derived_manifest.apply_snapshot_sql(con, segments_glob, manifest, values_only=True)
                _comment_snapshot(con)
                con.execute("commit")
                # the copy is durable before it replaces the catalogue: a power loss leaves either file whole
                con.execute("checkpoint")
        finally:
            con.close()
            Path(f"{tmp}.wal").unlink(missing_ok=True)
        if reusable:
            os.replace(tmp, target)
    finally:
        if not reusable:
            tmp.unlink(missing_ok=True)
    return reusable


STALE_TMP_AGE_S = 3600.0  # a catalog is written in seconds: a temporary one this old is abandoned
# .turnlens.duckdb.<host>.<pid>.tmp (older versions: without the host), and its WAL
_CATALOG_TMP = re.compile(
    rf"^\.{re.escape(CATALOG_FILE)}\.(?:(?P<host>[A-Za-z0-9-]+)\.)?(?P<pid>\d+)\.tmp(?:\.wal)?$"
)


def remove_stale_tmp(store_dir: Path) -> int:
    """Removes the temporary catalogs (and their WAL) of runs that were killed: of a process of this host that
    is gone, or, from another machine whose processes cannot be seen, once very old."""
    removed = 0
    host = segments.host_tag()
    for path in store_dir.glob(f".{CATALOG_FILE}.*.tmp*"):
        match = _CATALOG_TMP.match(path.name)
        here = match is not None and match["host"] in (None, host)
        if match is None or (here and int(match["pid"]) == os.getpid()):
            continue
        try:
            gone = here and not segments.pid_alive(int(match["pid"]))
            if gone or time.time() - path.stat().st_mtime > STALE_TMP_AGE_S:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


def apply_snapshot(
    con: duckdb.DuckDBPyConnection,
    segments_glob: str,
    views: list[SqlView],
    manifest: derived_manifest.Manifest | None,
) -> None:
    """Replaces the derived views by reads of the store's derived partitions (`manifest`, its current usable
    ones, if any); says in turnlens_snapshot what they cover (or that nothing is built yet)."""
    if manifest is None:
        derived_manifest.apply_no_state(con)
    else:
        derived_manifest.apply_snapshot_sql(con, segments_glob, manifest)
    _comment_snapshot(con)
    if manifest is not None:
        for view in views:
            if view.name in derived_manifest.VIEWS:
                comment_view(con, view)


def _comment_snapshot(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "comment on view turnlens_snapshot is "
        + sql_string(
            "the derived state the per-turn views read: rows for spans received up to watermark_at, from"
            " `partitions` partitions of `partitions_total` while a build runs; nulls before the first"
        )
    )


# --- the store a catalog belongs to ---------------------------------------------------------------------

STORE_TABLE = "turnlens_store"


def tables_fingerprint(store_dir: Path) -> str:
    """A digest of what the catalog's tables hold: the settings as they resolve (settings.toml, the
    environment) and the tool registry file. A catalog holding others is written whole again."""
    values = settings.resolve(store_dir)
    registry_file = store_dir / registry.REGISTRY_FILE
    digest = hashlib.sha256(repr(sorted(values.items())).encode() + b"\0")
    digest.update(registry_file.read_bytes() if registry_file.exists() else b"")
    return digest.hexdigest()


def store_record(store_dir: Path) -> tuple[str, str, str]:
    """What a catalog written now for `store_dir` records of it (record_store): the folder, the digest of
    the SQL, the digest of the settings and the tool registry."""
    return str(store_dir.resolve()), sql_fingerprint(), tables_fingerprint(store_dir)


def record_store(con: duckdb.DuckDBPyConnection, store_dir: Path, views_key: str) -> None:
    """Writes into the catalog the folder it was written for and the digest of the SQL it was written from:
    its views name that folder's files by absolute path, so a copied or moved store is told by a recorded
    folder that is not its own, and an upgrade by a digest that is not this turnlens's (`written_for`). The
    digest of its settings and registry tells a materialiser whether a copy of it may be reused; `views_key`
    (_views_key), whether the next catalogue may start from its bound views."""
    folder, sql, tables = store_record(store_dir)
    con.execute(
        f"create or replace table {STORE_TABLE} as"
        " select $dir::varchar as store_dir, $sql::varchar as sql_sha256, $tables::varchar as tables_sha256,"
        " $views::varchar as views_sha256",
        {"dir": folder, "sql": sql, "tables": tables, "views": views_key},
    )
    con.execute(
        f"comment on table {STORE_TABLE} is "
        + sql_string(
            "the store folder this catalog was written for (its views read that folder's files), the"
            " digest of the SQL it was written from, that of the settings and tool registry it holds, and"
            " that of what its views were bound from (SQL, DuckDB version, segment columns)"
        )
    )


def _recorded(con: duckdb.DuckDBPyConnection) -> tuple[str, str, str] | None:
    """What a catalog recorded of its store (record_store), on a connection to it; None if it does not say
    all of it (written by an older turnlens)."""
    row = _store_row(con)
    if "tables_sha256" not in row:
        return None
    return row["store_dir"], row["sql_sha256"], row["tables_sha256"]


def written_for(
    store_dir: Path, con: duckdb.DuckDBPyConnection | None = None
) -> tuple[Path | None, str | None]:
    """The folder the store's catalog was written for and the digest of its SQL; None for either without a
    catalog or for one that does not say (written by a turnlens before it recorded it). `con`: a connection
    to that catalog already open (else one is opened for the question)."""
    if con is None:
        try:
            opened = duckdb.connect(str(store_dir / CATALOG_FILE), read_only=True)
        except duckdb.IOException:
            return None, None
        try:
            return written_for(store_dir, opened)
        finally:
            opened.close()
    row = _store_row(con)
    folder = row.get("store_dir")
    return (Path(folder) if folder else None), row.get("sql_sha256")


def _store_row(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The catalog's record of its store (record_store) by column, as far as the turnlens that wrote it
    recorded it: nothing from one written before the record existed."""
    found = con.execute(
        "select count(*) from duckdb_tables()"
        " where table_name = $name and database_name = current_database()",
        {"name": STORE_TABLE},
    ).fetchone()
    if not (found and found[0]):
        return {}
    result = con.execute(f"select * from {STORE_TABLE}")
    columns = [column[0] for column in result.description or ()]
    row = result.fetchone()
    return dict(zip(columns, row, strict=True)) if row else {}


class MovedStore(CatalogError):
    """The store's catalog was written for another folder and cannot be rewritten here."""


def follow_move(store_dir: Path, con: duckdb.DuckDBPyConnection | None = None) -> bool:
    """Rewrites the store's catalog when it was written for another folder (the store was copied or moved):
    its views would read the files of that folder, or of none; or from other SQL (turnlens was upgraded): its
    views would lack what this version's queries call. Raises MovedStore when the catalog cannot be written
    here (a read-only copy), saying what to run. `con`: a connection to the catalog already open (it keeps
    reading the old file: reopen it when this returns True, the catalog rewritten)."""
    recorded, sql = written_for(store_dir, con)
    moved = recorded is not None and recorded != store_dir.resolve()
    upgraded = sql is not None and sql != sql_fingerprint()
    if not moved and not upgraded:
        return False
    if recorded is None:
        recorded = store_dir.resolve()
    try:
        write_catalog(store_dir, layout.segments_glob(store_dir))
    except OSError as exc:
        why = f"for {recorded} (the store was copied or moved)" if moved else "by another version of turnlens"
        raise MovedStore(
            f"the catalog of {store_dir} was written {why} and "
            f"cannot be rewritten here ({exc.strerror or exc}); run "
            f"`turnlens views --store {store_dir} --rebuild` as a user who can write the store"
        ) from exc
    return True


# how long a reader keeps trying to open a catalogue that was there a moment ago: a mount that caches file
# names (JuiceFS's default one-second kernel caches, for hosts that only read) can still name the file a
# rename replaced, whose open then fails as if the catalogue did not exist
CATALOG_REOPEN_S = 2.0


def while_catalog_gone(read: Callable[[], T], gone: Callable[[Exception], bool], wait_s: float) -> T:
    """`read()`, run again every 0.1 s for up to `wait_s` while it fails with an error `gone` says is the
    catalogue missing from its name; the error once that time is up."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return read()
        except Exception as exc:
            if not gone(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.1)


def _catalog_gone(exc: Exception) -> bool:
    return isinstance(exc, duckdb.IOException) and (
        "database does not exist" in str(exc) or "No such file or directory" in str(exc)
    )


def _open_catalog(path: Path) -> duckdb.DuckDBPyConnection:
    """The catalogue file opened read-only, its tables read once, waited for while it is gone from its name
    (while_catalog_gone). DuckDB reads a table's blocks on first use: read here, a later read cannot meet the
    file gone (a cached name can open the replaced file, whose blocks another machine's rename deleted)."""

    def attempt() -> duckdb.DuckDBPyConnection:
        con = duckdb.connect(str(path), read_only=True)
        try:
            tables = con.execute(
                "select table_name from duckdb_tables() where database_name = current_database()"
            ).fetchall()
            for (table,) in tables:
                con.execute("select * from query_table($table)", {"table": table}).fetchall()
        except Exception:
            con.close()
            raise
        return con

    return while_catalog_gone(attempt, _catalog_gone, CATALOG_REOPEN_S)


def connect(store_dir: Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the store's catalog: every view, no lock on the writers.

    A catalog written for another folder (a copied or moved store) is rewritten first (follow_move), so the
    views read this store's files. Parquet footers are cached for the connection's life: segments are never
    modified once visible (new files replace them), and one turn's queries otherwise re-read the footer of
    every segment per scan.
    """
    follow_move(store_dir)
    con = _open_catalog(store_dir / CATALOG_FILE)
    try:
        con.execute("set parquet_metadata_cache = true")
    except duckdb.InvalidInputException:
        # DuckDB hands out the instance this process already opened at this path; the dashboard locks that
        # instance's configuration (dashboard/data.py, harden) after this very setting was made on it
        pass
    return con


@contextmanager
def reading(store_dir: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to the store's catalogue under a reader lease (collector/leases.py): no file the
    connection lists is deleted before the block ends. For reads of bounded length: alerts, exports, commands.
    """
    with leases.reading(store_dir):
        con = connect(store_dir)
        try:
            yield con
        finally:
            con.close()
