"""The SQL files of `queries/`: read in their written order, parsed for what they document, and run.

Everything here is about SQL text and running it on a connection; nothing writes a catalog or knows the
derived state, so the catalog (catalog.py), the derived state's manifest (manifest.py) and its materialiser
(materialize.py) and the one-turn queries (turn_queries.py) all build on it.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import duckdb

T = TypeVar("T")

QUERIES_DIR = Path(__file__).resolve().parent
TABLE_FOLDER = "tables"
VIEW_FOLDERS = ("base", "views")

_CREATE = re.compile(r"create\s+or\s+replace\s+(?:view|table)\s+(\w+)", re.IGNORECASE)
_COLUMN_DOC = re.compile(r"^--\s{2,}(\w+):\s*(.+)$")
# a column's meaning goes on over the comment lines right below it, indented further (`--     ...`)
_CONTINUED_DOC = re.compile(r"^--\s{4,}\S")


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
        raise CatalogError(
            f"{folder} has SQL files that {order_file.name} does not list: {', '.join(orphans)}"
        )
    return listed


def parse_view(path: Path) -> SqlView:
    """Reads one view file: the first comment line is the grain, `--   column: meaning` lines the columns."""
    sql = path.read_text()
    match = _CREATE.search(sql)
    if not match:
        raise CatalogError(f"{path} does not create a view")
    header = [line for line in sql.splitlines() if line.startswith("--")]
    if not header:
        raise CatalogError(f"{path} has no header comment saying what a row is")
    grain = header[0].removeprefix("--").strip()
    columns: dict[str, str] = {}
    described = None  # the column whose meaning the lines right above went on describing
    for line in sql.splitlines()[1:]:
        doc = _COLUMN_DOC.match(line)
        if doc:
            described = doc.group(1)
            columns[described] = doc.group(2).strip()
        elif described and _CONTINUED_DOC.match(line):
            columns[described] += " " + line.removeprefix("--").strip()
        else:
            described = None
    return SqlView(name=match.group(1), path=path, sql=sql, grain=grain, columns=columns)


def load_views(queries_dir: Path = QUERIES_DIR) -> list[SqlView]:
    """Every view, in creation order: base views first, then the analytic views."""
    views: list[SqlView] = []
    for folder_name in VIEW_FOLDERS:
        folder = queries_dir / folder_name
        if folder.is_dir():
            views.extend(parse_view(folder / name) for name in read_order(folder))
    return views


def load_tables(queries_dir: Path = QUERIES_DIR) -> list[SqlView]:
    """The catalog's small tables (settings, tool registry), in creation order; same header rules as views."""
    return [parse_view(queries_dir / TABLE_FOLDER / name) for name in read_order(queries_dir / TABLE_FOLDER)]


def sql_string(text: str) -> str:
    """A SQL string literal. DDL takes no bound parameters, so paths and comments are quoted here."""
    return "'" + text.replace("'", "''") + "'"


_CREATE_VIEW_AS = re.compile(r"(create\s+or\s+replace\s+(?:temp\s+)?view\s+\w+)\s+as\b", re.IGNORECASE)


def unbound_view(sql: str) -> str:
    """SQL whose first CREATE VIEW is made WITH (DEFER_BINDING): DuckDB binds the view where a query reads it,
    not also when it is created (binding a view binds, again, every view it reads)."""
    return _CREATE_VIEW_AS.sub(r"\1 with (defer_binding) as", sql, count=1)


def sql_identifier(name: str) -> str:
    """A quoted SQL identifier: a column name as DuckDB reports it, whatever characters it holds."""
    return '"' + name.replace('"', '""') + '"'


def split_statements(sql: str) -> list[str]:
    """The statements of a SQL script, comment lines dropped (a `;` ends a statement at the end of a line)."""
    body = "\n".join(ln for ln in sql.splitlines() if not ln.lstrip().startswith("--"))
    return [s for s in re.split(r";\s*(?:\n|$)", body) if s.strip()]


def params_of(statement: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters one statement names (`$name`)."""
    used = set(re.findall(r"\$(\w+)", statement))
    return {k: v for k, v in params.items() if k in used}


def execute_script(
    con: duckdb.DuckDBPyConnection, sql: str, params: Mapping[str, Any]
) -> duckdb.DuckDBPyConnection:
    """Runs SQL of one or more statements with its parameters bound; the last statement's result is returned.

    DuckDB binds parameters in a single statement only: a script of several (a `set variable` first) runs them
    one by one, each with the parameters it names, and nothing else. A script that met a store file deleted
    after it was listed runs again (`retrying`).
    """

    def run() -> duckdb.DuckDBPyConnection:
        statements = split_statements(sql)
        for statement in statements[:-1]:
            con.execute(statement, params_of(statement, params))
        return con.execute(statements[-1], params_of(statements[-1], params))

    return retrying(run)


# --- reading while files are replaced ---------------------------------------------------------------------

READ_ATTEMPTS = 4  # a read that met a moved file is run again at most this many times in all
# how DuckDB says a file was gone: when it opened a file it had listed, or when a listed path matched nothing
_MOVED_FILE = ("No such file or directory", "No files found that match the pattern")


def moved_file(exc: BaseException) -> bool:
    """Whether a DuckDB error says a file it had listed was gone when it opened it (compaction, retention or a
    snapshot replaced it): the read is worth running again, it will list the files anew."""
    return isinstance(exc, duckdb.IOException) and any(phrase in str(exc) for phrase in _MOVED_FILE)


def retrying(read: Callable[[], T], *, attempts: int = READ_ATTEMPTS) -> T:
    """`read()`, run again (a few times, bounded) while it fails only because a store file moved under it.

    A reader holding a lease (`reading`) never meets one; a reader without (the lease timed out, or the
    catalogue it opened named a snapshot that has since been replaced) may, and a fresh listing succeeds.
    """
    for attempt in range(1, attempts + 1):
        try:
            return read()
        except duckdb.IOException as exc:
            if not moved_file(exc) or attempt == attempts:
                raise
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")  # the loop returns or raises


def sql_fingerprint(skip: Collection[str] = ()) -> str:
    """A digest of the SQL a catalog is written from (the views and the derived state's reads): a catalog
    written by another version of turnlens is told by a recorded digest that is not this one. `skip` leaves
    out files by their path under queries/ (`derived/current.sql`)."""
    digest = hashlib.sha256()
    for folder in (*VIEW_FOLDERS, "derived"):
        for path in sorted((QUERIES_DIR / folder).rglob("*.sql")):
            name = path.relative_to(QUERIES_DIR).as_posix()
            if name not in skip:
                digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
