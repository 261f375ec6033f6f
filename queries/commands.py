"""The `turnlens views` and `turnlens query` subcommands: the view catalogue (and its Markdown page), ad-hoc
and named queries."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import decimal
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
from turnlens.collector import quarantine, segments
from turnlens.kernel import layout, stops
from turnlens.queries import catalog, materialize, settings, spark_engine


def register(subparsers: argparse._SubParsersAction) -> None:
    views = subparsers.add_parser("views", help="list the views, their grain and their columns")
    views.add_argument("view", nargs="?", help="show only this view")
    views.add_argument("--store", type=Path, help="read the documentation from this store's catalog")
    views.add_argument(
        "--rebuild",
        action="store_true",
        help="rewrite the store's catalog first (after editing settings/tool_registry.toml)",
    )
    views.add_argument("--format", choices=("table", "csv", "json"), default="table")
    views.add_argument(
        "--markdown",
        action="store_true",
        help=f"print the views' reference page ({catalog.VIEWS_PAGE}) from a catalog"
        " built on an empty store, or on --store",
    )
    views.set_defaults(func=run_views)

    mat = subparsers.add_parser(
        "materialize",
        help="write the snapshot the per-turn views read (collectors run it on an interval)",
        epilog="Exit codes: 0 written, 1 the snapshot failed, 2 --store is not a store folder, "
        "75 another snapshot is being written.",
    )
    mat.add_argument("--store", type=Path, required=True, help="the store folder")
    mat.add_argument("--full", action="store_true", help="recompute every turn, not only the touched ones")
    mat.add_argument(
        "--margin",
        type=float,
        default=materialize.DEFAULT_MARGIN_S,
        metavar="SECONDS",
        help="cover spans received up to this long ago (default %(default)s)",
    )
    mat.add_argument(
        "--engine",
        choices=("duckdb", "spark"),
        default="duckdb",
        help="what computes a full build's buckets: this process, or Spark tasks on --master (a refresh runs"
        " here either way; docs/operating-at-scale.md)",
    )
    mat.add_argument(
        "--master",
        default=None,
        help="the Spark master URL with --engine spark: local[N], spark://HOST:7077, yarn (default local[*])",
    )
    mat.add_argument(
        "--bucket-spans",
        type=int,
        default=materialize.DEFAULT_BUCKET_SPANS,
        metavar="N",
        help="a full build's buckets hold about N stored copies, one Spark task each (default %(default)s)",
    )
    mat.add_argument(
        "--refresh-copies",
        type=int,
        default=materialize.REFRESH_COPIES_MAX,
        metavar="N",
        help="a refresh takes at most about N new copies, the oldest, and leaves the rest of a backlog to the"
        " next run (default %(default)s)",
    )
    mat.add_argument(
        "--threads",
        type=_threads,
        default=None,
        help="DuckDB threads, or `auto`: before each run, one per core the rest of the host leaves idle, at"
        " least one (what the collector runs; default: all cores)",
    )
    mat.add_argument("--memory-limit", default=None, help="DuckDB memory limit, e.g. 4GB (default: DuckDB's)")
    mat.add_argument(
        "--spill-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where DuckDB spills past its memory limit: a folder on a local disk, for a store on a network"
        " filesystem or in a bucket (default: DIR/derived/.spill in the store)",
    )
    mat.add_argument(
        "--every",
        type=float,
        default=None,
        metavar="SECONDS",
        help="keep running: a refresh starts every SECONDS, or SECONDS/2 after one that took longer (what the"
        " collector runs)",
    )
    mat.add_argument(
        "--fold",
        action="store_true",
        help="fold the deltas into the partitions' files now (a refresh folds them once they pile up)",
    )
    mat.add_argument(
        "--fold-after",
        type=int,
        default=materialize.DEFAULT_DELTAS_MAX,
        metavar="N",
        help="fold the deltas into the partitions' files once more than N are named; a loop (--every) folds"
        " beside its refreshes (default %(default)s)",
    )
    mat.add_argument("--json", action="store_true", help="print what each run did as one JSON line")
    mat.add_argument("--quiet", action="store_true", help="print nothing on success")
    mat.add_argument(
        "--grace",
        type=float,
        default=materialize.GRACE_S,
        metavar="SECONDS",
        help="keep a replaced snapshot for readers outside turnlens (default %(default)s)",
    )
    mat.set_defaults(func=run_materialize)

    query = subparsers.add_parser(
        "query",
        help="run SQL or a named query against a store's views",
        epilog=named_queries_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument("sql", metavar="SQL|NAME", help="SQL, or a query name from queries/named/")
    query.add_argument("--store", type=Path, required=True, help="the store folder (holds turnlens.duckdb)")
    query.add_argument("--param", action="append", default=[], metavar="K=V", help="a named query parameter")
    query.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a setting for this query (e.g. slo_cancel_to_ack_ms=50)",
    )
    query.add_argument("--format", choices=("table", "csv", "json"), default="table")
    query.set_defaults(func=run_query)


def named_queries_help() -> str:
    """The `--help` epilog: every named query with its parameters and what it returns."""
    lines = ["named queries (run as `turnlens query NAME --store DIR --param k=v`):"]
    for name, named in sorted(catalog.load_named().items()):
        params = " ".join(f"{p}=…" for p in named.params)
        lines.append(f"  {name}{'  ' + params if params else ''}")
        lines.append(f"      {named.title}")
    return "\n".join(lines)


def _looks_like_a_name(text: str) -> bool:
    """One word of letters, digits and underscores: meant as a named query, not as SQL."""
    return text.replace("_", "").isalnum()


def _pairs(items: list[str], what: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"turnlens: {what} {item!r} is not KEY=VALUE")
        pairs[key] = value
    return pairs


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


DISPLAY_DECIMALS = 3  # the table format rounds floats; csv and json keep every digit for other programs
BEHIND_PAUSE_S = 0.05  # a loop's pause after a run longer than its interval (loop_pause)
DELETE_CHANCE_S = 10.0  # but a pause of half an interval at least this often


def _cell(value: Any) -> str:
    """One value as the aligned table prints it: floats rounded so `143.29999999999993` reads 143.3."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{round(value, DISPLAY_DECIMALS):g}" if abs(value) < 1e15 else f"{value:g}"
    return str(_plain(value))


def write_rows(columns: list[str], rows: list[tuple], fmt: str, out: Any = None) -> None:
    """Prints rows as an aligned table, CSV or JSON (one array of objects)."""
    out = out or sys.stdout
    if fmt == "json":
        json.dump([{c: _plain(v) for c, v in zip(columns, row, strict=True)} for row in rows], out, indent=1)
        out.write("\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_plain(v) for v in row] for row in rows])
    else:
        cells = [[_cell(v) for v in row] for row in rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        out.write("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip() + "\n")
        for r in cells:
            out.write("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() + "\n")
        out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def empty_store_views() -> list[tuple[str, str, str, str, str]]:
    """`describe_views` of a catalog written over an empty store (no segments, no settings, no registry)."""
    with tempfile.TemporaryDirectory(prefix="turnlens-views-") as tmp:
        store_dir = Path(tmp)
        segments.ensure_layout(store_dir / layout.SEGMENTS_DIR)
        catalog.write_catalog(store_dir, layout.segments_glob(store_dir))
        with catalog.connect(store_dir) as con:
            return catalog.describe_views(con)


def run_views(args: argparse.Namespace) -> int:
    if args.markdown:
        if args.view:
            print("turnlens: --markdown documents every view; leave out VIEW", file=sys.stderr)
            return 2
        if args.store is not None:
            with catalog.reading(args.store) as con:
                rows = catalog.describe_views(con)
        else:
            rows = empty_store_views()
        sys.stdout.write(catalog.views_markdown(rows))
        return 0
    if args.store is not None:
        if args.rebuild:
            catalog.write_catalog(args.store, layout.segments_glob(args.store))
        with catalog.reading(args.store) as con:
            rows = catalog.describe_views(con)
    else:
        rows = [
            (view.name, view.grain, column, "", doc)
            for view in catalog.load_views()
            for column, doc in view.columns.items()
        ]
    if args.view:
        rows = [row for row in rows if row[0] == args.view]
        if not rows:
            print(f"turnlens: no view {args.view!r}", file=sys.stderr)
            return 1
    if args.format != "table":
        write_rows(["view", "grain", "column", "type", "meaning"], rows, args.format)
        return 0
    current = None
    for view, grain, column, type_, meaning in rows:
        if view != current:
            print(f"{'' if current is None else chr(10)}{view}\n  {grain}")
            current = view
        print(f"    {column:<30} {type_:<12} {meaning}".rstrip())
    return 0


def run_query(args: argparse.Namespace) -> int:
    params = _pairs(args.param, "--param")
    overrides = _pairs(args.set, "--set")
    named = catalog.load_named()
    try:
        for name, value in settings.resolve(overrides=overrides).items():
            if name in overrides:
                overrides[name] = str(value)
        if args.sql not in named and _looks_like_a_name(args.sql):
            known = ", ".join(sorted(named))
            raise catalog.CatalogError(f"no named query {args.sql!r} (known: {known}); or pass SQL")
        if params and args.sql not in named:
            raise catalog.CatalogError(f"--param is for named queries; known: {', '.join(sorted(named))}")
        columns, rows = quarantine.retrying(args.store, lambda: _query(args, named, params, overrides))
    except (duckdb.Error, catalog.CatalogError, settings.SettingsError) as exc:
        print(f"turnlens: {exc}", file=sys.stderr)
        return 1
    write_rows(columns, rows, args.format)
    return 0


def _query(
    args: argparse.Namespace, named: dict[str, Any], params: dict[str, str], overrides: dict[str, str]
) -> tuple[list[str], list[Any]]:
    """One run of `turnlens query`: its column names and rows, read under a reader lease."""
    with catalog.reading(args.store) as con:
        for name, value in overrides.items():
            # the name was checked by settings.resolve (a name cannot be bound); the value is bound
            con.execute(f"set variable {name} = $value", {"value": float(value)})
        if args.sql in named:
            cursor = catalog.run_named(con, args.sql, params)
        else:
            cursor = con.execute(args.sql)
        columns = [d[0] for d in cursor.description] if cursor.description else []
        return columns, cursor.fetchall() if columns else []


def _threads(value: str) -> int | str:
    """`--threads`: a number of threads, or `auto`."""
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of threads nor auto: {value!r}") from None


def run_materialize(args: argparse.Namespace) -> int:
    """Brings the derived state up to date, once or `--every` SECONDS until stopped; exit 0 when written, 1
    on an error, 2 when --store is no store folder, 75 (EX_TEMPFAIL) if another process is writing it (with
    --every: that run is skipped)."""
    if not (args.store / segments.SEGMENTS_DIR).is_dir():
        print(
            f"turnlens materialize: {args.store} is not a store folder (no segments/ in it)", file=sys.stderr
        )
        return 2
    # SIGTERM (the collector stopping its materialiser) or SIGINT (Ctrl-C, which reaches every process of the
    # demo's group) as SystemExit: the run's cleanup removes its temporary catalogue and files, where the
    # default action would leave them, and the process exits without a traceback
    stopped = stops.Stops((signal.SIGTERM, signal.SIGINT), lambda signum: SystemExit(128 + signum))
    try:
        with stopped.installed():
            return _materialize_runs(args)
    except RuntimeError:
        # DuckDB answers a signal that arrives during a query by interrupting it ("Query interrupted"):
        # a stop, not a failure, once the run's cleanup has run on the way out
        if stopped.received is None:
            raise
        return 128 + stopped.received


def _materialize_runs(args: argparse.Namespace) -> int:
    # a loop folds its deltas on a thread beside its refreshes (`--fold`, folding at once, folds in line)
    beside = None
    if args.every is not None and not args.fold:
        glob = layout.segments_glob(args.store)
        beside = materialize.FoldBeside(args.store, glob, args.memory_limit, args.spill_dir)
    try:
        return _loop(args, beside)
    finally:
        if beside is not None:
            beside.close()  # interrupted: the next run removes what it wrote


def loop_pause(ran_s: float, every_s: float, since_pause_s: float) -> float:
    """How long a loop waits after a run of `ran_s` before the next. Runs start every `every_s`; a run that
    took longer is behind the spans, and the next starts after BEHIND_PAUSE_S, since every second of pause is
    traffic the next run must take too (at 10,000 spans/s on two cores a half-interval pause made the runs
    ~4.5 s instead of ~2.8). But when the last pause of half an interval or more was DELETE_CHANCE_S ago
    (`since_pause_s`), it pauses half an interval: replaced files are deleted only while no run holds its
    reader lease, and the collector's sweeper looks twice a second (collector/maintenance.py)."""
    if ran_s > every_s and since_pause_s < DELETE_CHANCE_S:
        return BEHIND_PAUSE_S
    return max(every_s / 2, every_s - ran_s)


def _loop(args: argparse.Namespace, beside: materialize.FoldBeside | None) -> int:
    own_busy = 0.0  # cores this process kept busy over the last run and pause (part of the load average)
    others = None  # cores the rest of the host kept busy over the same time at a priority not below ours
    parent = os.environ.get("TURNLENS_PARENT_PID")  # set by the collector that started this loop
    paused = time.monotonic()  # when the loop last paused half an interval or more
    while True:
        started, cpu, own_user = time.monotonic(), time.process_time(), os.times().user
        host = materialize.host_cpu_seconds()
        threads = args.threads
        if threads == "auto":
            # the load average counts tasks waiting for a core too: on two cores 1.5 of them busy read as 2.6
            if others is None:
                others = max(0.0, os.getloadavg()[0] - own_busy)
            threads = materialize.idle_threads(others, os.cpu_count() or 1)
        code = _materialize_once(args, threads, beside)
        if args.every is None:
            return code
        ran = time.monotonic() - started if code == 0 else 0.0  # a busy store, a failed run: a whole interval
        pause = loop_pause(ran, args.every, time.monotonic() - paused)
        time.sleep(pause)
        if pause >= args.every / 2:
            paused = time.monotonic()
        if parent and os.getppid() != int(parent):  # the collector is gone (where the kernel did not say)
            return code
        wall = max(time.monotonic() - started, 1e-3)
        own_busy = (time.process_time() - cpu) / wall
        # this process's user time is in the host's niced time when it runs niced (the collector's nice 3)
        own_niced = (os.times().user - own_user) / wall if os.nice(0) > 0 else 0.0
        host_now = materialize.host_cpu_seconds()
        others = None
        if host is not None and host_now is not None:
            (busy, niced), (busy_now, niced_now) = host, host_now
            host_busy, host_niced = (busy_now - busy) / wall, (niced_now - niced) / wall
            others = materialize.others_busy(host_busy, host_niced, own_busy, own_niced)


def _resume_note(summary: dict[str, Any]) -> str:
    """What the run did with a full build a dead run left incomplete: finished it, or why it built again."""
    if "resumed_from" in summary:
        return (
            f", finishing the build of v{summary['resumed_from']}:"
            f" {summary['buckets_reused']} bucket(s) kept, {summary['buckets_built']} built"
        )
    if "not_resumed" in summary:
        left = summary["not_resumed"]
        return f"; the incomplete build of v{left['version']} was not resumed: {left['reason']}"
    return ""


def _materialize_once(
    args: argparse.Namespace, threads: int | None, beside: materialize.FoldBeside | None = None
) -> int:
    engine = None
    if args.engine == "spark":
        engine = spark_engine.SparkBuckets(
            args.master or spark_engine.DEFAULT_MASTER,
            task_threads=threads or 1,
            memory_limit=args.memory_limit,
            spill_dir=args.spill_dir,
        )
    elif args.master is not None:
        print("turnlens materialize: --master needs --engine spark", file=sys.stderr)
        return 2
    if args.bucket_spans < 1:
        print("turnlens materialize: --bucket-spans must be at least 1", file=sys.stderr)
        return 2
    if args.refresh_copies < 1:
        print("turnlens materialize: --refresh-copies must be at least 1", file=sys.stderr)
        return 2
    if args.fold_after < 0:
        print("turnlens materialize: --fold-after must be 0 or more", file=sys.stderr)
        return 2
    try:
        # an unreadable segment is moved aside rather than freezing the snapshot
        summary = quarantine.retrying(
            args.store,
            lambda: materialize.materialize(
                args.store,
                layout.segments_glob(args.store),
                full=args.full,
                margin_s=args.margin,
                threads=threads,
                memory_limit=args.memory_limit,
                spill_dir=args.spill_dir,
                grace_s=args.grace,
                engine=engine,
                bucket_spans=args.bucket_spans,
                refresh_copies_max=args.refresh_copies,
                deltas_max=0 if args.fold else args.fold_after,
                bootstrap=args.every is not None,  # a loop's first run on a small store: readable sooner
                beside=beside,
            ),
        )
    except materialize.MaterializeBusy as exc:
        if args.every is None:
            print(f"turnlens: {exc}", file=sys.stderr)
        return 75
    except (duckdb.Error, spark_engine.SparkUnavailable, spark_engine.SparkBuildFailed) as exc:
        print(f"turnlens: materialize failed: {exc}", file=sys.stderr)
        return 1
    args.full = False  # a loop's later runs refresh
    if engine is not None and summary["mode"] == "full":
        summary["spark"] = engine.summary()
    if args.json:
        print(json.dumps(summary), flush=True)
    elif not args.quiet:
        left = summary.get("backlog_copies")
        print(
            f"{summary['mode']} {summary['generation']} in {summary['seconds']:.1f} s:"
            f" {summary['partitions']} partitions, {len(summary.get('written_partitions', []))} touched,"
            f" {len(summary.get('folded_partitions', []))} folded,"
            f" {summary.get('touched_turns', 0)} turns recomputed, {summary['buckets']} bucket(s)"
            + _resume_note(summary)
            + (f"; {left} newer copies left to the next run" if left else ""),
            flush=True,
        )
    return 0
