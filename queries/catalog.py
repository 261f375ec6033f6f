"""Loads the SQL files in their written order, documents them, and writes the store's DuckDB catalog.

The catalog file `DIR/turnlens.duckdb` holds only views (over the store's Parquet segments), so it is
small and rewritten whole: built under a temporary name and renamed into place, which never disturbs
a reader that has the old file open.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

QUERIES_DIR = Path(__file__).resolve().parent
CATALOG_FILE = "turnlens.duckdb"
VIEW_FOLDERS = ("base", "views")

_CREATE = re.compile(r"create\s+or\s+replace\s+view\s+(\w+)", re.IGNORECASE)
_COLUMN_DOC = re.compile(r"^--\s{2,}(\w+):\s*(.+)$")


class CatalogError(Exception):
    """The SQL folder and its `_order` file disagree, or a file does not say what it defines."""


@dataclass(frozen=True)
class SqlView:
    """One SQL file: the view it creates, what a row is, and what each column means."""

    name: str
    path: Path
    sql: str
    grain: str
    columns: dict[str, str] = field(default_factory=dict)


def read_order(folder: Path) -> list[str]:
    """The file names of `folder/_order`, checked both ways against the `.sql` files present."""
    order_file = folder / "_order"
    listed = [
        line.strip()
        for line in order_file.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    present = {p.name for p in folder.glob("*.sql")}
    missing = [name for name in listed if name not in present]
    orphans = sorted(present - set(listed))
    if missing:
        raise CatalogError(f"{order_file} names files that do not exist: {', '.join(missing)}")
    if orphans:
        raise CatalogError(f"{folder} has SQL files that {order_file.name} does not list: {', '.join(orphans)}")
    return listed


def parse_view(path: Path) -> SqlView:
    """Reads one view file: the first comment line is the grain, `--   column: meaning` lines document columns."""
    sql = path.read_text()
    match = _CREATE.search(sql)
    if not match:
        raise CatalogError(f"{path} does not create a view")
    header = [line for line in sql.splitlines() if line.startswith("--")]
    if not header:
        raise CatalogError(f"{path} has no header comment saying what a row is")
    grain = header[0].removeprefix("--").strip()
    columns = {}
    for line in header[1:]:
        doc = _COLUMN_DOC.match(line)
        if doc:
            columns[doc.group(1)] = doc.group(2).strip()
    return SqlView(name=match.group(1), path=path, sql=sql, grain=grain, columns=columns)


def load_views(queries_dir: Path = QUERIES_DIR) -> list[SqlView]:
    """Every view, in creation order: base views first, then the analytic views."""
    views: list[SqlView] = []
    for folder_name in VIEW_FOLDERS:
        folder = queries_dir / folder_name
        if folder.is_dir():
            views.extend(parse_view(folder / name) for name in read_order(folder))
    return views


def _sql_string(text: str) -> str:
    """A SQL string literal. DDL takes no bound parameters, so paths and comments are quoted here."""
    return "'" + text.replace("'", "''") + "'"


def render(view: SqlView, segments_glob: str) -> str:
    """The view's SQL with the store's segment location filled in."""
    return view.sql.replace("{{segments}}", _sql_string(segments_glob))


def apply_views(con: duckdb.DuckDBPyConnection, segments_glob: str, views: list[SqlView]) -> None:
    """Creates every view on `con` and attaches its documentation as COMMENT ON."""
    for view in views:
        con.execute(render(view, segments_glob))
        con.execute(f"comment on view {view.name} is {_sql_string(view.grain)}")
        actual = {row[0] for row in con.execute(f"describe {view.name}").fetchall()}
        for column, doc in view.columns.items():
            if column in actual:
                con.execute(f"comment on column {view.name}.{column} is {_sql_string(doc)}")


def write_catalog(store_dir: Path, segments_glob: str, queries_dir: Path = QUERIES_DIR) -> Path:
    """Builds `store_dir/turnlens.duckdb` under a temporary name and renames it into place."""
    store_dir.mkdir(parents=True, exist_ok=True)
    target = store_dir / CATALOG_FILE
    tmp = store_dir / f".{CATALOG_FILE}.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        apply_views(con, segments_glob, load_views(queries_dir))
        con.execute("checkpoint")
    finally:
        con.close()
    Path(f"{tmp}.wal").unlink(missing_ok=True)
    os.replace(tmp, target)
    return target


def connect(store_dir: Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the store's catalog: every view, no lock on the writers."""
    return duckdb.connect(str(store_dir / CATALOG_FILE), read_only=True)
