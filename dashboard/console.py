"""The SQL console's guard: one read-only query, a row limit, a time limit, and an error a person can act on.

The connection is already read-only with external access closed (data.harden); this module also
refuses any statement that is not a query, so COPY ... TO cannot write into the store's folder.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import duckdb
import pandas as pd

# SET is admitted for `SET VARIABLE skew_tolerance_ms = 20` (the settings view reads variables); every
# configuration option is locked by data.harden, so a SET of one fails.
ALLOWED = {
    duckdb.StatementType.SELECT,
    duckdb.StatementType.EXPLAIN,
    duckdb.StatementType.SET,
    duckdb.StatementType.VARIABLE_SET,
}
LEADING = {duckdb.StatementType.SET, duckdb.StatementType.VARIABLE_SET}


class ConsoleError(Exception):
    """The query was refused or failed; the message is shown to the analyst as is."""


@dataclass(frozen=True)
class ConsoleResult:
    """The rows of the last statement, whether more were cut off, and how long it ran."""

    frame: pd.DataFrame
    truncated: bool
    seconds: float


def run(con: duckdb.DuckDBPyConnection, sql: str, *, row_limit: int, time_limit_s: float) -> ConsoleResult:
    """Runs `sql` (queries only, `SET VARIABLE` allowed before them) and returns at most `row_limit` rows."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise ConsoleError(f"The SQL does not parse: {exc}") from exc
    if not statements:
        raise ConsoleError("Type a query first, e.g. `select * from turns limit 10`.")
    refused = [s for s in statements if s.type not in ALLOWED]
    if refused:
        kind = refused[0].type.name.replace("_", " ")
        raise ConsoleError(
            f"This console is read-only: {kind} statements are refused. "
            "Use SELECT (or EXPLAIN; SET VARIABLE before a query)."
        )
    if statements[-1].type in LEADING:
        raise ConsoleError("The last statement must be a query whose rows to show.")

    timer = threading.Timer(time_limit_s, con.interrupt)
    started = time.perf_counter()
    timer.start()
    try:
        for statement in statements[:-1]:
            con.execute(statement.query)
        frame = con.sql(statements[-1].query).limit(row_limit + 1).df()
    except duckdb.InterruptException as exc:
        raise ConsoleError(
            f"Stopped after {time_limit_s:g} s (the console's time limit). Narrow the query: filter on "
            "session_id / turn_id or a time range, or aggregate before listing."
        ) from exc
    except duckdb.Error as exc:
        raise ConsoleError(f"{type(exc).__name__.removesuffix('Exception')} error: {exc}") from exc
    finally:
        timer.cancel()
    seconds = time.perf_counter() - started
    return ConsoleResult(frame=frame.head(row_limit), truncated=len(frame) > row_limit, seconds=seconds)
