"""`turnlens export`: an incident's timeline as one HTML, Markdown or JSON file for the review."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import duckdb
from turnlens.collector import quarantine
from turnlens.kernel.durations import parse_time

EXIT_CODES = """exit codes:
  0  written
  1  nothing in the store matches
  2  bad arguments (argparse's own errors too)
  3  the store cannot be read"""

SUFFIXES = {".html": "html", ".htm": "html", ".md": "md", ".json": "json"}


def register(subparsers: argparse._SubParsersAction) -> None:
    export = subparsers.add_parser(
        "export",
        help="write an incident timeline (one turn, a session or a time range) as HTML, Markdown or JSON",
        description=__doc__,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("--store", required=True, type=Path, help="the store directory")
    export.add_argument("--session", help="the session to export")
    export.add_argument("--turn", help="one turn of --session")
    export.add_argument(
        "--from", dest="start", metavar="T1", help="with --to: every turn with a span in [T1, T2]"
    )
    export.add_argument("--to", dest="end", metavar="T2", help="ISO-8601 UTC time")
    export.add_argument(
        "--format", choices=("html", "md", "json"), help="default: from --out's suffix, else html"
    )
    export.add_argument("--out", required=True, help="the file to write, or - for standard output")
    export.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from turnlens.export.report import ExportError, export_incident  # imports Altair only when used

    if bool(args.session) == bool(args.start or args.end):
        print("turnlens export: give --session S [--turn T], or --from T1 --to T2", file=sys.stderr)
        return 2
    if args.turn and not args.session:
        print("turnlens export: --turn needs --session", file=sys.stderr)
        return 2
    fmt = args.format or SUFFIXES.get(Path(args.out).suffix.lower(), "html")
    try:
        start = parse_time(args.start) if args.start else None
        end = parse_time(args.end) if args.end else None
        if args.start and not (start and end):
            raise ExportError("--from needs --to")
        text = quarantine.retrying(  # an unreadable segment is moved aside and the export read again
            args.store,
            lambda: export_incident(
                args.store, session_id=args.session, turn_id=args.turn, start=start, end=end, fmt=fmt
            ),
        )
    except ExportError as exc:
        print(f"turnlens export: {exc}", file=sys.stderr)
        return 1
    except (duckdb.Error, OSError, ValueError) as exc:
        print(f"turnlens export: cannot read the store: {exc}", file=sys.stderr)
        return 3
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    print(f"turnlens export: wrote {out} ({fmt}, {len(text.encode()):,} bytes)", file=sys.stderr)
    return 0
