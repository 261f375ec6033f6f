"""The `turnlens views` and `turnlens query` subcommands: the view catalogue (and its Markdown page), ad-hoc
and named queries."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import decimal
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb
from turnlens.collector import segments
from turnlens.kernel import layout
from turnlens.queries import catalog, materialize, settings


def register(subparsers: argparse._SubParsersAction) -> None:
    views = subparsers.add_parser("views", help="list the views, their grain and their columns")
    views.add_argument("view", nargs="?", help="show only this view")
    views.add_argument("--store", type=Path, help="read the documentation from this store's catalog")
    views.add_argument("--rebuild", action="store_true",
                       help="rewrite the store's catalog first (after editing settings/tool_registry.toml)")
    views.add_argument("--format", choices=("table", "csv", "json"), default="table")
    views.add_argument("--markdown", action="store_true",
                       help=f"print the views' reference page ({catalog.VIEWS_PAGE}) from a catalog"
                       " built on an empty store, or on --store")
    views.set_defaults(func=run_views)

    mat = subparsers.add_parser(
        "materialize", help="write the snapshot the per-turn views read (collectors run it on an interval)"
    )
    mat.add_argument("--store", type=Path, required=True, help="the store folder")
    mat.add_argument("--full", action="store_true", help="recompute every turn, not only the touched ones")
    mat.add_argument("--margin", type=float, default=materialize.DEFAULT_MARGIN_S, metavar="SECONDS",
                     help="cover spans received up to this long ago (default %(default)s)")
    mat.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: all cores)")
    mat.add_argument("--memory-limit", default=None, help="DuckDB memory limit, e.g. 4GB (default: DuckDB's)")
    mat.add_argument("--quiet", action="store_true", help="print nothing on success")
    mat.set_defaults(func=run_materialize)

    query = subparsers.add_parser("query", help="run SQL or a named query against a store's views")
    query.add_argument("sql", metavar="SQL|NAME", help="SQL, or a query name from queries/named/")
    query.add_argument("--store", type=Path, required=True, help="the store folder (holds turnlens.duckdb)")
    query.add_argument("--param", action="append", default=[], metavar="K=V", help="a named query parameter")
    query.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                       help="override a setting for this query (e.g. slo_cancel_to_ack_ms=50)")
    query.add_argument("--format", choices=("table", "csv", "json"), default="table")
    query.set_defaults(func=run_query)


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
        cells = [[("" if v is None else str(_plain(v))) for v in row] for row in rows]
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
            with catalog.connect(args.store) as con:
                rows = catalog.describe_views(con)
        else:
            rows = empty_store_views()
        sys.stdout.write(catalog.views_markdown(rows))
        return 0
    if args.store is not None:
        if args.rebuild:
            catalog.write_catalog(args.store, layout.segments_glob(args.store))
        with catalog.connect(args.store) as con:
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
        with catalog.connect(args.store) as con:
            for name, value in overrides.items():
                # the name was checked by settings.resolve above (a name cannot be bound); the value is bound
                con.execute(f"set variable {name} = $value", {"value": float(value)})
            if args.sql in named:
                cursor = catalog.run_named(con, args.sql, params)
            else:
                if params:
                    known = ", ".join(sorted(named))
                    raise catalog.CatalogError(f"--param is for named queries; known: {known}")
                cursor = con.execute(args.sql)
            columns = [d[0] for d in cursor.description] if cursor.description else []
            rows = cursor.fetchall() if columns else []
    except (duckdb.Error, catalog.CatalogError, settings.SettingsError) as exc:
        print(f"turnlens: {exc}", file=sys.stderr)
        return 1
    write_rows(columns, rows, args.format)
    return 0


def run_materialize(args: argparse.Namespace) -> int:
    """Writes the next snapshot; exit 0 when written, 1 on an error, 75 (EX_TEMPFAIL) if another one runs."""
    try:
        summary = materialize.materialize(
            args.store,
            layout.segments_glob(args.store),
            full=args.full,
            margin_s=args.margin,
            threads=args.threads,
            memory_limit=args.memory_limit,
        )
    except materialize.MaterializeBusy as exc:
        print(f"turnlens: {exc}", file=sys.stderr)
        return 75
    except duckdb.Error as exc:
        print(f"turnlens: materialize failed: {exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        rows = ", ".join(f"{name} {count}" for name, count in summary["rows"].items())
        print(
            f"{summary['mode']} snapshot {summary['generation']} in {summary['seconds']:.1f} s"
            f" ({summary['buckets']} bucket{'s' if summary['buckets'] != 1 else ''}): {rows}"
        )
    return 0
