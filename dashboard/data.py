"""The dashboard's only way to the store: one hardened read-only connection, named SQL files, cached results.

Pages never hold SQL; they ask for a named query in `dashboard/sql/` with bound parameters and get a
pandas DataFrame back. The connection reads the store's catalog read-only, so ingestion is never
blocked, and it is reopened when the catalog file is replaced by `write_catalog`. Every read holds a
reader lease (collector/leases.py), so compaction and snapshot replacement delete nothing it listed.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pandas as pd
import streamlit as st
from turnlens.collector import leases, quarantine
from turnlens.queries import catalog, turn_queries

T = TypeVar("T")

SQL_DIR = Path(__file__).resolve().parent / "sql"
# the pages' queries that are the project's named queries (queries/named/), so that `turnlens query` and the
# alert runner answer the same: store_bounds is where `?asof=newest` and `--at newest` both end
SHARED = ("store_bounds",)

STORE_ENV = "TURNLENS_STORE"
REFRESH_ENV = "TURNLENS_DASHBOARD_REFRESH"  # seconds between automatic refreshes; 0 turns them off
CACHE_TTL_ENV = "TURNLENS_DASHBOARD_CACHE_TTL"  # seconds a query result is reused
# Short enough that a finding the materialiser published is on a page within seconds (results outlive a
# catalogue rewrite), long enough that the pages of one refresh share their queries.
DEFAULT_CACHE_TTL_S = 5
MEMORY_ENV = "TURNLENS_DASHBOARD_MEMORY"  # DuckDB memory_limit of the dashboard, e.g. 25% or 4GB


class StoreNotReady(Exception):
    """The store cannot answer yet (no catalog, or a view the page needs is missing); the message says why."""


@dataclass(frozen=True)
class Settings:
    """What the dashboard needs to know, by precedence: defaults < environment < flags after `--`."""

    store_dir: Path
    refresh_seconds: int = 0
    cache_ttl_seconds: int = DEFAULT_CACHE_TTL_S
    sql_row_limit: int = 10_000
    sql_time_limit_seconds: float = 10.0
    memory_limit: str = "25%"  # DuckDB's own default is 80 % of RAM; the collector shares this machine


def _flags(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--store")
    parser.add_argument("--refresh", type=int)
    parser.add_argument("--cache-ttl", type=int)
    return parser.parse_known_args(list(argv))[0]


@functools.cache
def settings() -> Settings:
    """The settings of this process (`streamlit run app.py -- --store DIR` or `TURNLENS_STORE=DIR`)."""
    return read_settings()


def read_settings() -> Settings:
    """The settings as the flags and the environment give them now (settings() keeps the first answer)."""
    flags = _flags(sys.argv[1:])
    store = flags.store or os.environ.get(STORE_ENV) or "./turnlens-data"
    refresh = flags.refresh if flags.refresh is not None else int(os.environ.get(REFRESH_ENV, "0"))
    ttl_env = int(os.environ.get(CACHE_TTL_ENV, DEFAULT_CACHE_TTL_S))
    ttl = flags.cache_ttl if flags.cache_ttl is not None else ttl_env
    memory = os.environ.get(MEMORY_ENV, Settings.memory_limit)
    return Settings(
        store_dir=Path(store).expanduser().resolve(),
        refresh_seconds=refresh,
        cache_ttl_seconds=ttl,
        memory_limit=memory,
    )


# --- the connection ----------------------------------------------------------------------------------


def harden(con: duckdb.DuckDBPyConnection, store_dir: Path, *, memory_limit: str | None = None) -> None:
    """Lets the connection read the store's segments and snapshots, nothing else on disk or network, for good.

    `enable_external_access = false` alone also stops the views, which read Parquet files; so the
    segments and derived (materialised views) folders are allowed first, then access is closed and the
    configuration locked so no query can open it again. The SQL console does not use this connection: DuckDB
    allows writing wherever it allows reading, so the console runs in a sealed process (console.py).
    """
    [(locked,)] = con.execute("select current_setting('lock_configuration')").fetchall()
    if locked:  # DuckDB handed out this process's instance of the catalog again: it is hardened already
        return
    folders = [str((store_dir / name).resolve()) + "/" for name in ("segments", "derived")]
    if memory_limit:
        con.execute("set memory_limit = $limit", {"limit": memory_limit})
    con.execute("set allowed_directories = $dirs", {"dirs": folders})
    con.execute("set enable_external_access = false")
    con.execute("set lock_configuration = true")


class _Catalog:
    """The open catalog, reopened when `write_catalog` renames a new file into place."""

    def __init__(self, store_dir: Path) -> None:
        self.store_dir = store_dir
        self.path = store_dir / catalog.CATALOG_FILE
        self.lock = threading.Lock()
        self.stamp: tuple[int, int] | None = None
        self.con: duckdb.DuckDBPyConnection | None = None

    def _current_stamp(self) -> tuple[int, int]:
        """The catalogue file's inode and modification time. Once it has been seen, a catalogue missing from
        its name is waited for (catalog.while_catalog_gone): a mount that caches file names can still name the
        file a rename just replaced."""
        wait_s = catalog.CATALOG_REOPEN_S if self.stamp is not None else 0.0
        try:
            stat = catalog.while_catalog_gone(
                self.path.stat, lambda exc: isinstance(exc, FileNotFoundError), wait_s
            )
        except FileNotFoundError:
            raise StoreNotReady(
                f"No catalog at `{self.path}`. Ingest data into this store first "
                f"(`turnlens ingest --store {self.store_dir} FILE`) or point the dashboard at another store."
            ) from None
        return stat.st_ino, stat.st_mtime_ns

    def _current(self) -> tuple[duckdb.DuckDBPyConnection, tuple[int, int]]:
        """The connection to the catalog file in place now (under the lock), opened anew if it was replaced.

        The replaced connection is closed first: DuckDB hands out an instance still open for the same path,
        which would read the replaced file. DuckDB refuses to close it while another page's query runs on
        it; that page's reads and this one then go on with the replaced catalog (its files are still there
        under their leases) and a later call, once it is idle, opens the new one.
        """
        stamp = self._current_stamp()
        if self.con is None or stamp != self.stamp:
            if self.con is not None:
                try:
                    self.con.close()
                except duckdb.ResourceInUseException:
                    assert self.stamp is not None
                    return self.con, self.stamp
                self.con = None
            con = catalog.connect(self.store_dir)
            harden(con, self.store_dir, memory_limit=read_settings().memory_limit)
            self.con, self.stamp = con, stamp
        return self.con, stamp

    def cursor(self) -> tuple[duckdb.DuckDBPyConnection, tuple[int, int]]:
        with self.lock:
            con, stamp = self._current()
            return con.cursor(), stamp

    def current_stamp(self) -> tuple[int, int]:
        """The stamp of the catalog in place, its connection opened if it is new (no cursor made)."""
        with self.lock:
            return self._current()[1]


@st.cache_resource(show_spinner=False)
def _catalog(store_dir: str) -> _Catalog:
    return _Catalog(Path(store_dir))


def cursor() -> duckdb.DuckDBPyConnection:
    """A fresh cursor on the store's catalog (one per query: DuckDB cursors are not shared across threads)."""
    return _catalog(str(settings().store_dir)).cursor()[0]


@contextmanager
def reading() -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh cursor under a reader lease: nothing the block's queries list is deleted before it ends.

    The lease is taken before the catalog's stamp is checked, so a snapshot replaced just before is seen
    replaced (its old files are deleted only after its catalog was), never half.
    """
    with leases.reading(settings().store_dir):
        con = cursor()
        try:
            yield con
        finally:
            con.close()


def read(run: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    """`run(cursor)` under a reader lease, on a fresh cursor again if a store file moved under it anyway."""

    def attempt() -> T:
        with reading() as con:
            return run(con)

    return catalog.retrying(attempt)


@st.cache_resource(show_spinner=False)
def _console(store_dir: str) -> Any:
    from turnlens.dashboard import console

    return console.Sandbox(Path(store_dir), memory_limit=read_settings().memory_limit)


def console_sandbox() -> Any:
    """The SQL console's sealed worker for this store (dashboard/console.py); one per dashboard process."""
    return _console(str(settings().store_dir))


def catalog_stamp() -> tuple[int, int]:
    """Changes whenever the catalog file is replaced (the SQL console opens the catalogue it names)."""
    return _catalog(str(settings().store_dir)).current_stamp()


# --- named queries -----------------------------------------------------------------------------------


@functools.cache
def load_sql(name: str) -> str:
    """The text of `dashboard/sql/<name>.sql`, or of `queries/named/<name>.sql` for a query of SHARED."""
    folder = catalog.QUERIES_DIR / catalog.NAMED_FOLDER if name in SHARED else SQL_DIR
    path = folder / f"{name}.sql"
    if not path.is_file():
        raise KeyError(f"no named query {name!r} in {SQL_DIR}")
    return path.read_text()


def query_names() -> list[str]:
    """Every named query the pages run: the dashboard's own, and those it shares (SHARED)."""
    return sorted([p.stem for p in SQL_DIR.glob("*.sql")] + list(SHARED))


def _missing_view(exc: duckdb.Error) -> str | None:
    text = str(exc)
    marker = "with name "
    if isinstance(exc, duckdb.CatalogException) and marker in text:
        return text.split(marker, 1)[1].split()[0]
    return None


def run_named(con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any]) -> pd.DataFrame:
    """Runs one named query with its parameters bound; no Streamlit involved (the benchmark uses this).

    A one-turn query (TURN_QUERIES) alone holds its turn first; run_turn holds it once for all of them.
    """
    if name in TURN_QUERIES:
        frame = run_turn(con, params["session"], params["turn"], names=(name,))[name]
        if isinstance(frame, str):
            raise StoreNotReady(frame)
        return frame
    return _run_sql(con, name, params)


def _run_sql(con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any]) -> pd.DataFrame:
    sql = load_sql(name)
    try:
        return catalog.execute_script(con, sql, params).df()  # several statements: the last's rows
    except duckdb.CatalogException as exc:
        raise _not_ready(exc, name) from exc


def _not_ready(exc: duckdb.CatalogException, name: str) -> StoreNotReady:
    """What to do about a query that names a view the store's catalog lacks; any other error as it is."""
    view = _missing_view(exc)
    if view is None:
        raise exc
    return StoreNotReady(
        f"The store's catalog has no `{view}` (needed by the `{name}` query). Rebuild it with "
        f"`turnlens views --store {settings().store_dir}` after upgrading turnlens."
    )


# Timings of the latest queries of this process, newest last, for the benchmark (bench/dashboard.py); bounded,
# as the dashboard server runs for days.
TIMINGS: collections.deque[tuple[str, float]] = collections.deque(maxlen=256)


def _ttl() -> int:
    return read_settings().cache_ttl_seconds  # read at import: settings() must wait for the store to be known


# A result is reused for the cache's TTL whatever happened to the catalogue meanwhile: the collector's
# materialiser renames a new catalogue into place after every refresh of the derived state (every second or
# so while spans arrive), so a cache that also ended with the catalogue file was empty on nearly every rerun,
# and a click on a chart read the store again. Refresh now (refresh()) forgets every result at once.
@st.cache_data(ttl=_ttl(), show_spinner=False, max_entries=512)
def _cached(store: str, name: str, params: tuple[tuple[str, Any], ...]) -> pd.DataFrame:
    values = {k: list(v) if isinstance(v, tuple) else v for k, v in params}
    started = time.perf_counter()
    frame = quarantine.retrying(
        Path(store), lambda: read(lambda con: run_named(con, name, values)), unless=(StoreNotReady,)
    )
    TIMINGS.append((name, time.perf_counter() - started))
    return frame


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def query(name: str, **params: Any) -> pd.DataFrame:
    """The named query's rows, cached for the configured TTL (read from the catalogue in place then)."""
    key = tuple(sorted((k, _hashable(v)) for k, v in params.items()))
    frame = _cached(str(settings().store_dir), name, key)
    return frame.copy()


def snapshot_time() -> tuple[int, int, int] | None:
    """`(watermark_ms, built_ms, margin_ms)` of the snapshot the per-turn views read (margin_ms: how recent
    the spans its materialiser leaves for a later run are); None while the store has none."""
    try:
        frame = query("snapshot_time")
    except StoreNotReady:  # no `turnlens_snapshot` view: the six per-turn views are computed live
        return None
    if not len(frame):
        return None
    row = frame.iloc[0]
    return int(row["watermark_ms"]), int(row["built_ms"]), int(row["margin_ms"])


def waiting_spans() -> tuple[int, int] | None:
    """`(copies, oldest_ms)`: the stored spans the per-turn views do not show yet and when the oldest was
    received; None when there are none (or the catalogue predates turnlens_waiting)."""
    try:
        frame = query("waiting_spans")
    except StoreNotReady:
        return None
    if not len(frame) or not frame["copies"].iloc[0]:
        return None
    return int(frame["copies"].iloc[0]), int(frame["oldest_ms"].iloc[0])


def build_progress() -> tuple[int, int] | None:
    """`(partitions done, partitions in all)` while a full build of the derived state runs; None otherwise."""
    try:
        frame = query("snapshot_time")
    except StoreNotReady:
        return None
    if not len(frame) or pd.isna(frame["partitions_total"].iloc[0]):
        return None
    return int(frame["partitions"].iloc[0]), int(frame["partitions_total"].iloc[0])


def refresh() -> None:
    """Forgets every cached result so the next run reads the store again."""
    _cached.clear()
    _cached_turn.clear()


# --- one turn, live from its own traces (the Turn detail page) -------------------------------------------

# The page's one-turn queries are the turn queries of queries/turn/ (turn_queries: the export and `turnlens
# query NAME_of_turn` run the same), read over the turn held once on the cursor: its traces are found and
# scanned once for the page, not once per query (a scan of the segments is ~0.2 s at 1M spans).
TURN_HOLD = "turn_hold"  # its timing's name in TIMINGS
TURN_QUERIES = {
    "turn_events": "timeline",
    "turn_findings": "findings",
    "turn_tokens": "tokens",
    "turn_cancel": "cancel_acks",
    "turn_ledger": "side_effects",
    "turn_verdicts": "verdicts",
    "turn_skew": "skew",
    "turn_spans": "spans",
}
# the columns the page shows of a turn query, where it shows fewer than the query gives
TURN_COLUMNS = {
    "turn_ledger": [
        "tool_call_id",
        "tool_name",
        "tier",
        "dispatch",
        "status",
        "committed_hlc",
        "committed_after_stop",
        "receipt_shown",
        "undone",
        "undo_failed",
        "discarded",
        "third_party_status",
        "third_party_acks",
        "charged_amount",
        "idempotency_key",
        "approved",
    ],
}


def run_turn(
    con: duckdb.DuckDBPyConnection, session_id: str, turn_id: str, names: Sequence[str] = tuple(TURN_QUERIES)
) -> dict[str, pd.DataFrame | str]:
    """The page's one-turn queries on one cursor, the turn held once; a query the catalogue cannot answer
    maps to why. No Streamlit involved (the tests use this); the timings go to TIMINGS, the hold's among them.
    """
    started = time.perf_counter()
    try:
        turn_queries.hold(
            con,
            [session_id],
            [turn_id],
            keys=any(TURN_QUERIES[n] not in turn_queries.TIMELINE_ONLY for n in names),
        )
    except duckdb.CatalogException as exc:
        return dict.fromkeys(names, str(_not_ready(exc, TURN_HOLD)))
    TIMINGS.append((TURN_HOLD, time.perf_counter() - started))
    frames: dict[str, pd.DataFrame | str] = {}
    for name in names:
        started = time.perf_counter()
        try:
            frame = turn_queries.run(con, TURN_QUERIES[name]).df()
        except duckdb.CatalogException as exc:  # one section of the page says so; the others still show
            frames[name] = str(_not_ready(exc, name))
        else:
            frames[name] = frame[TURN_COLUMNS[name]] if name in TURN_COLUMNS else frame
        TIMINGS.append((name, time.perf_counter() - started))
    return frames


@st.cache_data(ttl=_ttl(), show_spinner=False, max_entries=64)
def _cached_turn(store: str, session_id: str, turn_id: str) -> dict[str, pd.DataFrame | str]:
    def read_turn() -> dict[str, pd.DataFrame | str]:
        return read(lambda con: run_turn(con, session_id, turn_id))

    return quarantine.retrying(Path(store), read_turn, unless=(StoreNotReady,))


def turn_query(name: str, *, session: str, turn: str) -> pd.DataFrame:
    """One of TURN_QUERIES for one turn, live from its traces; the page's others come from the same read,
    and its reruns within the cache's TTL (a click on a span, a toggle) from the same cached answers."""
    if name not in TURN_QUERIES:
        raise KeyError(f"{name!r} is not a one-turn query ({', '.join(TURN_QUERIES)})")
    frame = _cached_turn(str(settings().store_dir), session, turn)[name]
    if isinstance(frame, str):
        raise StoreNotReady(frame)
    return frame.copy()


# --- alerts (kept by `turnlens alerts run` in DIR/alerts/, beside the catalog) --------------------------


def alert_state() -> Any:
    """The alert state `turnlens alerts run` keeps in the store (empty when it never ran)."""
    from turnlens.alerts import state

    store = settings().store_dir
    return state.AlertState.load(store / state.STATE_FOLDER / state.STATE_FILE)


def alert_history() -> pd.DataFrame:
    """Every firing/resolved transition recorded in the store, newest first."""
    from turnlens.alerts import history

    records = history.load_history(settings().store_dir)
    return pd.json_normalize(records)[::-1].reset_index(drop=True) if records else pd.DataFrame()


def alerts_frame(alerts: Sequence[Any]) -> pd.DataFrame:
    """Alerts as rows: state, severity, name, how many rows it stands for, the labels that tell alerts apart,
    the summary, the worst examples, and the turn to open (its own, or a grouped alert's worst)."""
    rows = []
    for alert in alerts:
        extra = {k: v for k, v in alert.labels.items() if k not in ("alertname", "severity")}
        worst = alert.examples[0] if alert.examples else {}
        rows.append(
            {
                "state": alert.state,
                "severity": alert.severity,
                "alert": alert.rule,
                "count": alert.count,
                "summary": alert.annotations.get("summary", ""),
                "labels": ", ".join(f"{k}={v}" for k, v in sorted(extra.items())),
                "examples": "\n".join(e.get("line", "") for e in alert.examples),
                "active since": alert.active_at,
                "fired at": alert.fired_at,
                "resolved at": alert.resolved_at,
                "session_id": alert.labels.get("session_id", worst.get("session_id")),
                "turn_id": alert.labels.get("turn_id", worst.get("turn_id")),
            }
        )
    order = {"critical": 0, "warning": 1, "info": 2}
    frame = pd.DataFrame(rows)
    if len(frame):
        frame = frame.sort_values(
            by=["severity", "alert"], key=lambda s: s.map(order) if s.name == "severity" else s
        )
    return frame.reset_index(drop=True)
