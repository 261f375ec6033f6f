"""The SQL console: queries in a sealed child process, a row limit, a time limit, a readable error.

Read-only by construction, not by inspecting statements. The queries run in a process of their own
(`turnlens.dashboard.console_worker`): the kernel (Landlock) refuses it every file write, creation, removal
and truncation, every TCP connection, and every read outside the catalog, segments/, derived/ and Python's own
installation; inside it DuckDB opens the catalog read-only, may read segments/ and derived/ only, and has its
configuration locked. `EXPLAIN ANALYZE COPY ... TO`, `EXPORT DATABASE`, `ATTACH`, `INSTALL` all fail there
whatever DuckDB would have allowed. The statement check below only gives a friendlier first message.
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import duckdb
import pandas as pd
from turnlens.kernel.layout import CATALOG_FILE

# SET VARIABLE is admitted for `SET VARIABLE skew_tolerance_ms = 20` (the settings view reads variables);
# every configuration option is locked in the worker, so a SET of one fails there.
ALLOWED = {
    duckdb.StatementType.SELECT,
    duckdb.StatementType.EXPLAIN,
    duckdb.StatementType.SET,
    duckdb.StatementType.VARIABLE_SET,
}
LEADING = {duckdb.StatementType.SET, duckdb.StatementType.VARIABLE_SET}
WORKER_START_S = 60.0  # importing DuckDB and pandas and opening the catalog, on a busy machine
WORKER_GRACE_S = 10.0  # beyond the time limit before a worker that does not answer is killed


class ConsoleError(Exception):
    """The query was refused or failed; the message is shown to the analyst as is."""


@dataclass(frozen=True)
class ConsoleResult:
    """The rows of the last statement, whether more were cut off, and how long it ran."""

    frame: pd.DataFrame
    truncated: bool
    seconds: float


def check(sql: str) -> list[str]:
    """The statements of `sql` if it reads only (queries, `SET VARIABLE` before them); else a ConsoleError."""
    try:
        statements = duckdb.extract_statements(sql)
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
    return [s.query for s in statements]


def is_plain_read(sql: str) -> bool:
    """Whether `sql` is SELECTs only: the one kind a link may run without the analyst pressing Run."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error:
        return False
    return bool(statements) and all(s.type == duckdb.StatementType.SELECT for s in statements)


def execute(
    con: duckdb.DuckDBPyConnection, statements: list[str], *, row_limit: int, time_limit_s: float
) -> ConsoleResult:
    """Runs the statements on `con`, keeping at most `row_limit` rows of the last (inside the worker)."""
    timer = threading.Timer(time_limit_s, con.interrupt)
    started = time.perf_counter()
    timer.start()
    try:
        for statement in statements[:-1]:
            con.execute(statement)
        frame = con.sql(statements[-1]).limit(row_limit + 1).df()
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


def open_sealed_catalog(
    catalog_file: Path, read_folders: list[Path], memory_limit: str | None
) -> duckdb.DuckDBPyConnection:
    """The catalog, read-only, DuckDB allowed to read `read_folders` only, no extension loading, locked.

    These settings give the analyst DuckDB's own messages ("disabled by configuration", "locked"); the
    worker's Landlock seal is what holds when a setting would not.
    """
    con = duckdb.connect(str(catalog_file), read_only=True)
    folders = [str(folder.resolve()) + "/" for folder in read_folders]
    con.execute("set parquet_metadata_cache = true")
    if memory_limit:
        con.execute("set memory_limit = $limit", {"limit": memory_limit})
    con.execute("set temp_directory = ''")  # nothing spills to disk: it could not be written anyway
    con.execute("set autoinstall_known_extensions = false")
    con.execute("set autoload_known_extensions = false")
    con.execute("set allowed_directories = $dirs", {"dirs": folders})
    con.execute("set enable_external_access = false")
    con.execute("set lock_configuration = true")
    return con


def serve(
    con: duckdb.DuckDBPyConnection,
    requests: IO[bytes],
    replies: IO[bytes],
    *,
    catalog_file: Path | None = None,
    reopen: Callable[[Path], duckdb.DuckDBPyConnection] | None = None,
) -> None:
    """Answers (catalog, statements, row_limit, time_limit_s) frames until `requests` closes (the worker's
    loop); `con` is `catalog_file` open, and a frame naming another copy of the catalog opens that first."""
    while True:
        request = read_frame(requests)
        if request is None:
            return
        wanted, statements, row_limit, time_limit_s = request
        if wanted is not None and reopen is not None and Path(wanted) != catalog_file:
            try:
                fresh = reopen(Path(wanted))
            except duckdb.Error as exc:
                write_frame(replies, ("error", f"The catalog could not be opened: {exc}"))
                continue
            con.close()
            con, catalog_file = fresh, Path(wanted)
        cursor = con.cursor()  # a fresh client context: no variable outlives its query
        try:
            result = execute(cursor, statements, row_limit=row_limit, time_limit_s=time_limit_s)
        except ConsoleError as exc:
            write_frame(replies, ("error", str(exc)))
        else:
            write_frame(replies, ("ok", result.frame, result.truncated, result.seconds))
        finally:
            cursor.close()


# --- frames on a pipe: 4-byte length, then a pickle -----------------------------------------------------


def write_frame(stream: IO[bytes], value: Any) -> None:
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("!I", len(body)) + body)
    stream.flush()


def _read_exact(stream: IO[bytes], size: int) -> bytes | None:
    chunks = b""
    while len(chunks) < size:
        chunk = stream.read(size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return chunks


def read_frame(stream: IO[bytes]) -> Any:
    """The next value on `stream`, or None at its end."""
    header = _read_exact(stream, 4)
    if header is None:
        return None
    body = _read_exact(stream, struct.unpack("!I", header)[0])
    return None if body is None else pickle.loads(body)  # noqa: S301 - our own worker's replies


# --- the sealed worker, seen from the dashboard -----------------------------------------------------------


class Sandbox:
    """The console's worker process for one store; restarted when it dies or hangs.

    The worker reads a copy of the store's catalog in a private folder (console_worker.py says why): when the
    catalog changes, the next query brings a fresh copy and the worker opens it, in a tenth of a second where
    starting a worker (Python, DuckDB and pandas imported under the seal) takes seconds on a loaded machine.
    """

    def __init__(self, store_dir: Path, *, memory_limit: str | None = None) -> None:
        self.store_dir = store_dir
        self.memory_limit = memory_limit
        self.lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.stamp: Any = None
        self.copies: Path | None = None  # the private folder of catalog copies, made on first use
        self.copy: Path | None = None  # the newest copy, the one queries are sent to
        self.copied = 0

    def _copy_catalog(self, seen: bool) -> Path:
        """A fresh copy of the store's catalog in the private folder, renamed into place so the worker never
        sees half of one. A catalogue the dashboard has `seen` and that is missing from its name is waited
        for (catalog.while_catalog_gone): a mount that caches file names can still name the file a rename
        just replaced."""
        # imported here: the sealed worker imports this module, and must not import the queries package
        from turnlens.queries.catalog import CATALOG_REOPEN_S, while_catalog_gone

        if self.copies is None:
            self.copies = Path(tempfile.mkdtemp(prefix="turnlens-console-"))
            atexit.register(shutil.rmtree, self.copies, ignore_errors=True)  # the dashboard never closes it
        self.copied += 1
        target = self.copies / f"catalog-{self.copied}.duckdb"
        partial = target.with_suffix(".tmp")
        try:
            while_catalog_gone(
                lambda: shutil.copyfile(self.store_dir / CATALOG_FILE, partial),
                lambda exc: isinstance(exc, FileNotFoundError),
                CATALOG_REOPEN_S if seen else 0.0,
            )
        except FileNotFoundError:
            raise ConsoleError(
                f"No catalog at `{self.store_dir / CATALOG_FILE}` yet: ingest data into this store first."
            ) from None
        os.replace(partial, target)
        return target

    def _forget_copies(self, keep: Path | None) -> None:
        if self.copies is not None:
            for path in self.copies.iterdir():
                if path != keep:
                    path.unlink(missing_ok=True)

    def _start(self) -> subprocess.Popen[bytes]:
        assert self.copy is not None
        command = [
            sys.executable, "-m", "turnlens.dashboard.console_worker", str(self.store_dir), str(self.copy)
        ]
        if self.memory_limit:
            command.append(self.memory_limit)
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
        ready = self._reply(process, WORKER_START_S)
        if ready != ("ready",):
            self._stop(process)
            reason = ready[1] if isinstance(ready, tuple) and len(ready) > 1 else "it did not start"
            raise ConsoleError(f"The console cannot run here: {reason}")
        return process

    def _reply(self, process: subprocess.Popen[bytes], timeout_s: float) -> Any:
        assert process.stdout is not None
        readable, _, _ = select.select([process.stdout], [], [], timeout_s)
        if not readable:
            return None
        return read_frame(process.stdout)

    @staticmethod
    def _stop(process: subprocess.Popen[bytes]) -> None:
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()

    def close(self) -> None:
        with self.lock:
            if self.process is not None:
                self._stop(self.process)
                self.process = None
            if self.copies is not None:
                shutil.rmtree(self.copies, ignore_errors=True)
                self.copies = self.copy = None

    def run(
        self, statements: list[str], *, row_limit: int, time_limit_s: float, stamp: Any = None
    ) -> ConsoleResult:
        """Runs the statements in the worker; `stamp` changes when the catalog file was replaced."""
        with self.lock:
            if self.process is not None and self.process.poll() is not None:
                self._stop(self.process)
                self.process = None
            if self.copy is None or stamp != self.stamp or stamp is None:
                self.copy, self.stamp = self._copy_catalog(seen=stamp is not None), stamp
            if self.process is None:
                self.process = self._start()
            process = self.process
            assert process.stdin is not None
            try:
                write_frame(process.stdin, (str(self.copy), statements, row_limit, time_limit_s))
            except BrokenPipeError:
                reply = None
            else:
                reply = self._reply(process, time_limit_s + WORKER_GRACE_S)
            self._forget_copies(keep=self.copy)  # the worker answered from this one, or is gone
            if (
                reply is None
            ):  # it hung past its own interrupt, or died (out of memory): start afresh next time
                self._stop(process)
                self.process = None
                raise ConsoleError(
                    f"The query did not finish within {time_limit_s:g} s and was stopped (the console's time "
                    "limit), or its process ran out of memory. Narrow the query."
                )
        if reply[0] == "error":
            raise ConsoleError(reply[1])
        _, frame, truncated, seconds = reply
        return ConsoleResult(frame=frame, truncated=truncated, seconds=seconds)


def run(
    sandbox: Sandbox, sql: str, *, row_limit: int, time_limit_s: float, stamp: Any = None
) -> ConsoleResult:
    """Checks `sql` reads only (a friendly message if not), then runs it in the sealed worker."""
    return sandbox.run(check(sql), row_limit=row_limit, time_limit_s=time_limit_s, stamp=stamp)
