"""The one set of queries about given turns: the Turn detail page, `turnlens export` and `turnlens query
NAME_of_turn` all run these files of `queries/turn/`, each with one row shape and one sort order.

`hold` reads the turns once from their own traces into temporary tables of the connection (hold.sql finds
their traces; the detectors matching idempotency keys across turns need the other turns sharing their keys:
on a catalogue of derived state hold_kept_keys.sql holds the facts it keeps of those turns and adds the traces
of the few it must read whole, without one hold_keys.sql adds every trace sharing a key; hold_read.sql reads
the traces once); every query of `queries/turn/` then reads those tables and keeps the held turns' rows,
whether one turn (the page) or an incident's many (the export); the first to need the turns' ledger, cancel
acknowledgements or findings holds those too (hold_found.sql, `execute`). Holding again on the same
connection replaces what was held. On a store of many partitions, finding the traces reads the identity of
only the partitions the identity index names for the turns (identity_index.narrowed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import duckdb
from turnlens.queries import identity_index, sqlfiles
from turnlens.queries import manifest as derived_manifest

T = TypeVar("T")

TURN_SQL = sqlfiles.QUERIES_DIR / "turn"
HOLD = "hold"
HOLD_KEYS = "hold_keys"
HOLD_KEPT_KEYS = "hold_kept_keys"
HOLD_READ = "hold_read"
HOLD_FOUND = "hold_found"
# what hold_found.sql holds: a query naming one of them has it computed once after a hold, on first need
FOUND_TABLES = ("turnlens_turn_ledger", "turnlens_turn_acks", "turnlens_turn_found")
# the queries that read only the turns' own timeline, so holding them needs no search for shared keys
TIMELINE_ONLY = frozenset({"timeline"})


@dataclass(frozen=True)
class TurnQuery:
    """One query of `queries/turn/`: its name, what it returns (the file's first comment line), its SQL."""

    name: str
    title: str
    sql: str

    @property
    def needs_keys(self) -> bool:
        return self.name not in TIMELINE_ONLY


def load(folder: Path = TURN_SQL) -> dict[str, TurnQuery]:
    """Every turn query by name (the hold files are not queries)."""
    queries = {}
    for path in sorted(folder.glob("*.sql")):
        if path.stem in (HOLD, HOLD_KEYS, HOLD_KEPT_KEYS, HOLD_READ, HOLD_FOUND):
            continue
        sql = path.read_text()
        header = [line for line in sql.splitlines() if line.startswith("--")]
        if not header:
            raise sqlfiles.CatalogError(f"{path} has no header comment saying what it returns")
        if "$" in "\n".join(ln for ln in sql.splitlines() if not ln.startswith("--")):
            raise sqlfiles.CatalogError(f"{path} takes parameters; the held turns are its only input")
        queries[path.stem] = TurnQuery(path.stem, header[0].removeprefix("--").strip(), sql)
    return queries


def hold(
    con: duckdb.DuckDBPyConnection, sessions: Sequence[str], turns: Sequence[str], *, keys: bool = True
) -> None:
    """Reads the turns (parallel lists of session and turn ids) into temporary tables of `con`.

    `keys=False` holds their own traces only (enough for `timeline`), without the traces sharing their keys.
    """
    if len(sessions) != len(turns):
        raise ValueError(f"{len(sessions)} sessions for {len(turns)} turns: the lists go in pairs")
    params = {"sessions": list(sessions), "turns": list(turns)}
    find = (TURN_SQL / f"{HOLD}.sql").read_text()
    # derived state keeps each turn's facts of its idempotency keys (derived/snapshot.sql, kept_key_facts_of)
    kept = keys and derived_manifest.reads_derived_state(con)
    share = (TURN_SQL / f"{HOLD_KEPT_KEYS if kept else HOLD_KEYS}.sql").read_text()
    with identity_index.narrowed(con) as narrowing:
        if narrowing is None:
            sqlfiles.execute_script(con, find, params)
            if keys:
                sqlfiles.execute_script(con, share, {})
        else:
            narrowing.turn_traces(find, params, list(turns))
            if keys:
                narrowing.key_traces(share)
    sqlfiles.execute_script(con, (TURN_SQL / f"{HOLD_READ}.sql").read_text(), {})


def run(con: duckdb.DuckDBPyConnection, name: str, folder: Path = TURN_SQL) -> duckdb.DuckDBPyConnection:
    """Runs one turn query over what `hold` holds on `con`; the caller fetches the rows."""
    queries = load(folder)
    if name not in queries:
        raise sqlfiles.CatalogError(f"no turn query {name!r}; known: {', '.join(sorted(queries))}")
    return execute(con, queries[name].sql, folder)


def execute(con: duckdb.DuckDBPyConnection, sql: str, folder: Path = TURN_SQL) -> duckdb.DuckDBPyConnection:
    """Runs a turn query's SQL over what `hold` holds. The first query after a hold that reads the turns'
    ledger, acknowledgements or findings holds all three (hold_found.sql), which the page's five such
    queries then share."""
    if any(table in sql for table in FOUND_TABLES) and not _holds_found(con):
        sqlfiles.execute_script(con, (folder / f"{HOLD_FOUND}.sql").read_text(), {})
    return sqlfiles.execute_script(con, sql, {})


def _holds_found(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether hold_found.sql ran since the last hold: its last table is there (hold.sql drops all three)."""
    held = con.execute(
        "select count(*) from duckdb_tables() where temporary and table_name = ?", [FOUND_TABLES[-1]]
    ).fetchone()
    return held is not None and held[0] > 0


def run_all(
    con: duckdb.DuckDBPyConnection,
    sessions: Sequence[str],
    turns: Sequence[str],
    names: Sequence[str],
    fetch: Callable[[duckdb.DuckDBPyConnection], T],
) -> dict[str, T | duckdb.Error]:
    """Holds the turns once, then runs each named query and fetches it; a query the catalog cannot answer
    (a view or column it lacks) maps to its error, so the others still answer."""
    hold(con, sessions, turns, keys=any(load()[name].needs_keys for name in names))
    answers: dict[str, T | duckdb.Error] = {}
    for name in names:
        try:
            answers[name] = fetch(run(con, name))
        except (duckdb.CatalogException, duckdb.BinderException) as exc:
            answers[name] = exc
    return answers
