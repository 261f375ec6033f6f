"""`turnlens collect`, `turnlens ingest` and `turnlens compact`: the collector's subcommands."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from turnlens.collector import compaction, quarantine
from turnlens.collector import settings as collector_settings
from turnlens.collector.compaction import CompactionBusy
from turnlens.collector.store import PrepareStore, Store
from turnlens.kernel.durations import parse_seconds


def register(subparsers: argparse._SubParsersAction, prepare_store: PrepareStore | None = None) -> None:
    """Adds collect, ingest and compact. `prepare_store` makes a store the commands open readable (the
    program passes the catalog writer of the queries, which the collector does not import)."""
    collect = subparsers.add_parser(
        "collect",
        help="receive OTLP traces (HTTP 4318, gRPC 4317) into a store",
        description="Receive OTLP traces over HTTP and gRPC and store them durably. Settings: defaults "
        "< TURNLENS_* environment variables < flags.",
    )
    collector_settings.add_arguments(collect)
    collect.set_defaults(func=run_collect, prepare_store=prepare_store)

    ingest = subparsers.add_parser(
        "ingest",
        help="import OTLP JSON files (Collector file exporter JSON Lines, single requests, .gz)",
        epilog="Exit codes: 0 stored, 1 nothing stored and problems found, 2 bad arguments (a FILE missing, "
        "or --store is not a folder).",
    )
    ingest.add_argument("files", nargs="+", type=Path, metavar="FILE")
    ingest.add_argument("--store", type=Path, default=None, help="store directory (env TURNLENS_STORE)")
    ingest.add_argument("--quiet", action="store_true", help="no progress bar")
    ingest.set_defaults(func=run_ingest, prepare_store=prepare_store)

    compact = subparsers.add_parser("compact", help="merge small segments; apply a retention")
    compact.add_argument("--store", type=Path, default=None, help="store directory (env TURNLENS_STORE)")
    compact.add_argument("--retention", default=None, help="also drop data older than this (e.g. 30d)")
    compact.add_argument(
        "--grace", default=None, help="how long replaced segments stay for readers outside turnlens (e.g. 1m)"
    )
    compact.set_defaults(func=run_compact)


def _store_dir(args: argparse.Namespace) -> Path:
    return collector_settings.resolve(argparse.Namespace(store=args.store)).store


def store_path_problem(root: Path) -> str | None:
    """Why `root` cannot be a store folder (it, or a folder the store needs in it, is a file); else None."""
    for path in (root, root / "segments", root / "derived"):
        if path.exists() and not path.is_dir():
            return f"{path} is a file, not a folder; --store names the store's folder"
    return None


def run_collect(args: argparse.Namespace) -> int:
    from turnlens.collector.server import Collector

    try:
        settings = collector_settings.resolve(args)
    except ValueError as exc:
        print(f"turnlens collect: {exc}", file=sys.stderr)
        return 2
    collector = Collector(settings, prepare_store=args.prepare_store)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        collector.start()
    except OSError as exc:
        collector.stop()
        print(f"turnlens collect: {exc}", file=sys.stderr)
        return 1
    print(collector.describe(), flush=True)
    while not stop.wait(1.0):
        pass
    print("turnlens collect: stopping (no new requests; flushing)", flush=True)
    collector.stop()
    print(collector.summary(), flush=True)
    return 0


def run_ingest(args: argparse.Namespace) -> int:
    from turnlens.collector.file_import import ingest_files

    root = _store_dir(args)
    if problem := store_path_problem(root):
        print(f"turnlens ingest: {problem}", file=sys.stderr)
        return 2
    missing = [str(path) for path in args.files if not path.is_file()]
    if missing:
        print(f"turnlens ingest: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    with Store(root) as store:
        if args.prepare_store is not None:
            args.prepare_store(root, store.segments_glob)
        report = ingest_files(store, args.files, progress=not args.quiet)
    print(report.summary())
    return 0 if report.stored or not report.problems else 1


def run_compact(args: argparse.Namespace) -> int:
    root = _store_dir(args)
    if not (root / "segments").is_dir():
        print(f"turnlens compact: {root} is not a store", file=sys.stderr)
        return 2
    grace_s = parse_seconds(args.grace) if args.grace else compaction.DEFAULT_GRACE_S
    with Store(root, grace_s=grace_s) as store:
        quarantine.sweep(root)  # a segment that cannot be read would fail every merge that includes it
        try:
            if args.retention:
                dropped = store.apply_retention(parse_seconds(args.retention))
                print(f"turnlens compact: dropped {dropped} date partition(s) older than {args.retention}")
            result = store.compact()
        except CompactionBusy as exc:
            print(f"turnlens compact: {exc}", file=sys.stderr)
            return 75  # EX_TEMPFAIL: another process is maintaining the store; try again later
    print(f"turnlens compact: {result}")
    return 0
