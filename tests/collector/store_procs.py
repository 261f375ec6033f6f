"""Span rows for the store tests, and the real processes they run: a writer that prints what it was
acknowledged, a reader that queries the catalog in a loop, a compactor.

Run as `python store_procs.py writer|reader|compactor --store DIR ...`; the tests import it
(pyproject's pytest `pythonpath` puts this folder on sys.path).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from turnlens.collector.store import Store, StoreOverloaded
from turnlens.kernel.schema import SEGMENT_SCHEMA
from turnlens.queries import catalog

NS_PER_DAY = 86_400 * 1_000_000_000
ACK = "ack"


def span_id(writer: int, n: int) -> str:
    """16 hex digits: which writer made the span, then its number."""
    return f"{writer:04x}{n:012x}"


def spans(
    ids: list[str], *, start_ns: int | None = None, received_ns: int | None = None, name: str = "op"
) -> pa.Table:
    """Rows with the given span ids (8 spans a trace), every other column as an exporter might leave it."""
    start = time.time_ns() if start_ns is None else start_ns
    received = time.time_ns() if received_ns is None else received_ns
    n = len(ids)
    columns: dict[str, list[Any]] = {name_: [None] * n for name_ in SEGMENT_SCHEMA.names}
    columns |= {
        "trace_id": [f"{int(i, 16) // 8:032x}" for i in ids],
        "span_id": ids,
        "name": [name] * n,
        "kind": ["internal"] * n,
        "start_time_unix_nano": [start] * n,
        "end_time_unix_nano": [start + 1_000_000] * n,
        "attributes": ['{"session.id": "s1"}'] * n,
        "events": [[] for _ in ids],
        "links": [[] for _ in ids],
        "resource_attributes": ['{"service.name": "tests"}'] * n,
        "service_name": ["tests"] * n,
        "node": ["tests-1"] * n,
        "span_session_id": ["s1"] * n,
        "received_unix_nano": [received] * n,
    }
    return pa.Table.from_pydict(columns, schema=SEGMENT_SCHEMA)


def parse_acks(stdout: str) -> set[str]:
    """The span ids a writer printed as acknowledged; a line cut short by kill -9 lacks its '.': ignored."""
    acked: set[str] = set()
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0] == ACK and parts[4] == ".":
            writer, first, last = int(parts[1]), int(parts[2]), int(parts[3])
            acked.update(span_id(writer, n) for n in range(first, last + 1))
    return acked


def run_writer(args: argparse.Namespace) -> int:
    """Appends from several threads until --batches or --seconds (or kill -9); prints each batch acked."""
    store = Store(Path(args.store), flush_interval_s=args.flush_interval)
    print("ready", flush=True)
    out = threading.Lock()
    deadline = time.monotonic() + args.seconds
    yesterday = time.time_ns() - NS_PER_DAY

    def loop(thread: int) -> None:
        n = thread * 10**9
        for batch in range(args.batches):
            if time.monotonic() >= deadline:
                break
            ids = [span_id(args.writer, n + k) for k in range(args.batch)]
            table = spans(ids)
            if thread == 0 and batch % 2:  # half of one thread's batches straddle two days
                table = pa.concat_tables([table.slice(0, 5), spans(ids[5:], received_ns=yesterday)])
            try:
                store.append(table)
            except StoreOverloaded as exc:
                time.sleep(exc.retry_after_s)
                continue
            with out:
                sys.stdout.write(f"{ACK} {args.writer} {n} {n + args.batch - 1} .\n")
                sys.stdout.flush()
            n += args.batch + 1

    threads = [threading.Thread(target=loop, args=(t,)) for t in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    return 0


def query(con: duckdb.DuckDBPyConnection, sql: str, attempts: int = 3) -> list[tuple[Any, ...]]:
    """Runs `sql`, again if a file it listed was deleted before it was read (see readme: store.md).

    A sweep deletes the segments a compaction replaced; a query that listed one just before can no
    longer open it, and a sweep of many files may catch a retry too. Past `attempts` it fails.
    """
    for attempt in range(1, attempts + 1):
        try:
            return con.sql(sql).fetchall()
        except duckdb.IOException as exc:
            if "No such file" not in str(exc) or attempt == attempts:
                raise
            print("retried", flush=True)
            time.sleep(0.1)
    raise AssertionError("unreachable")


def run_reader(args: argparse.Namespace) -> int:
    """Queries the views through the catalog until --stop-file exists; prints counts; an error fails it."""
    store_dir = Path(args.store)
    deadline = time.monotonic() + args.seconds
    kept = catalog.connect(store_dir)  # a long-lived connection, as the dashboard keeps one
    print("ready", flush=True)
    queries = 0
    while time.monotonic() < deadline and not (args.stop_file and Path(args.stop_file).exists()):
        fresh = catalog.connect(store_dir)  # and a new one each time, as an analyst's shell would
        for con in (kept, fresh):
            started = time.monotonic()
            ((spans_count,),) = query(con, "select count(*) from spans")
            ((events_count,),) = query(con, "select count(*) from span_events")
            print(f"count {spans_count} {events_count} {time.monotonic() - started:.3f}", flush=True)
            queries += 2
        fresh.close()
        time.sleep(0.02)  # busy like a dashboard with several users, not a tight loop hogging both cores
    # closed here, not by the interpreter's finalisation: a reader that left it open once died of SIGSEGV
    # after its last line (every query answered), which failed the test for what happens at exit
    kept.close()
    print(f"queries {queries}", flush=True)
    return 0


def run_compactor(args: argparse.Namespace) -> int:
    """One compaction pass, as `turnlens compact` would run it."""
    store = Store(Path(args.store))
    try:
        result = store.compact(min_segments=2, grace_s=args.grace)
    finally:
        store.close()
    print(f"merged {result.merged_segments} replaced {result.replaced_segments}", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["writer", "reader", "compactor"])
    parser.add_argument("--store", required=True)
    parser.add_argument("--seconds", type=float, default=3600.0)
    parser.add_argument("--writer", type=int, default=1, help="a number put in the span ids")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--batches", type=int, default=10**9, help="batches each writer thread appends")
    parser.add_argument("--flush-interval", type=float, default=0.05)
    parser.add_argument("--grace", type=float, default=300.0)
    parser.add_argument("--stop-file", default=None, help="readers stop once this file exists")
    args = parser.parse_args()
    return {"writer": run_writer, "reader": run_reader, "compactor": run_compactor}[args.role](args)


if __name__ == "__main__":
    sys.exit(main())
