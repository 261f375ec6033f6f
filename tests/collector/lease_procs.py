"""The processes of the reader-lease test: readers of each kind reading in a loop, and a maintainer that
compacts and materialises with a grace period of zero, so every replaced file is deleted as soon as the
readers let it.

Run as `python lease_procs.py reader KIND --store DIR --stop-file F` or `... maintainer --store DIR ...`;
each reader prints `ok` or `failed <error>` per read and `reads <ok> <failed>` at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from turnlens.collector import compaction, leases
from turnlens.collector.store import Store
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog, materialize

Read = Callable[[], object]


def first_turn(store: Path) -> tuple[str, str]:
    """A turn of the store, to read alone (the one-turn queries and the export)."""
    with catalog.reading(store) as con:
        [(session, turn)] = catalog.execute_script(
            con, "select session_id, turn_id from turns order by session_id, turn_id limit 1", {}
        ).fetchall()
    return str(session), str(turn)


def readers(store: Path) -> dict[str, Read]:
    """One read per kind of reader, each through the same entry points its product counterpart uses."""

    def named(name: str, **params: object) -> Read:
        def read() -> object:
            with catalog.reading(store) as con:  # a fresh connection each time, as a command opens one
                return catalog.run_named(con, name, params).fetchall()

        return read

    def live_view() -> object:
        with catalog.reading(store) as con:
            return catalog.execute_script(con, "select count(*) from turn_events", {}).fetchall()

    def export() -> object:
        from turnlens.export import report

        session, turn = first_turn(store)
        return report.export_incident(store, session_id=session, turn_id=turn, fmt="json")

    def dashboard() -> Read:
        from turnlens.dashboard import data  # a long-lived connection, reopened when the catalogue changes

        kept = data._Catalog(store)

        def read() -> object:
            def run() -> object:
                with leases.reading(store):  # as data.read does
                    con = kept.cursor()[0]
                    try:
                        return data.run_named(con, "overview_counts", {"from_ms": None, "to_ms": None})
                    finally:
                        con.close()

            return catalog.retrying(run)

        return read

    session, turn = first_turn(store)
    return {
        "live": live_view,
        "turn": named("turn_timeline_of", session=session, turn=turn),
        "divergences": named("findings_by_kind"),
        "export": export,
        "dashboard": dashboard(),
    }


def reads_of(out: str) -> tuple[int, list[str]]:
    """What a reader printed (run_reader): its count of reads that succeeded, and the lines of those that
    failed."""
    failures = [line for line in out.splitlines() if line.startswith("failed")]
    ok, failed = (int(n) for n in out.strip().splitlines()[-1].split()[1:])
    assert failed == len(failures), out[-500:]
    return ok, failures


def run_reader(args: argparse.Namespace) -> int:
    store = Path(args.store)
    read = readers(store)[args.kind]
    print("ready", flush=True)
    ok = failed = 0
    while not Path(args.stop_file).exists():
        started = time.monotonic()
        try:
            read()
            ok += 1
            print(f"ok {time.monotonic() - started:.2f}", flush=True)
        except Exception as exc:  # noqa: BLE001 - every failed read is counted and shown
            failed += 1
            print(f"failed {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
        time.sleep(1.0)  # busy like a dashboard with a few users, not a tight loop hogging both cores
    print(f"reads {ok} {failed}", flush=True)
    return 0


def run_maintainer(args: argparse.Namespace) -> int:
    """Compacts (grace 0) and materialises (grace 0) in turns until the stop file exists."""
    store = Path(args.store)
    # patient enough for five busy readers on two loaded cores to drain at the turnstile, so files are
    # deleted while they read (the product's default leaves a deletion to the next pass after 2 s)
    leases.DELETER_WAIT_S = 30.0
    print("ready", flush=True)
    deleted = snapshots = 0
    while not Path(args.stop_file).exists():
        with Store(store) as writer_side:
            try:
                deleted += writer_side.compact(min_segments=2, grace_s=0).deleted_files
            except compaction.CompactionBusy:
                pass
        started = time.monotonic()
        # deltas folded at once: every run replaces partition files (and deltas) under the readers
        materialize.materialize(store, segments_glob(store), margin_s=0, grace_s=0, threads=1, deltas_max=0)
        snapshots += 1
        deleted += compaction.sweep(store)
        print(f"deleted {deleted} snapshots {snapshots} ({time.monotonic() - started:.1f} s)", flush=True)
    print(f"swept {compaction.sweep(store)}", flush=True)  # what readers kept until they stopped
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["reader", "maintainer"])
    parser.add_argument("kind", nargs="?", default="live")
    parser.add_argument("--store", required=True)
    parser.add_argument("--stop-file", required=True)
    args = parser.parse_args()
    return {"reader": run_reader, "maintainer": run_maintainer}[args.role](args)


if __name__ == "__main__":
    sys.exit(main())
