"""The one `turnlens` command; each area of the code registers its own subcommands."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from turnlens import __version__
from turnlens.kernel import layout

# Each module exposes `register(subparsers)`, adding its subcommands with `set_defaults(func=...)`;
# `func(args)` returns the process exit code. Listed here once so `turnlens --help` shows them in order.
COMMAND_MODULES = (
    "turnlens.collector.commands",  # collect, ingest, compact
    "turnlens.sample_data.commands",  # simulate
    "turnlens.queries.commands",  # views, query
    "turnlens.alerts.commands",  # alerts run, alerts test
    "turnlens.dashboard.commands",  # dashboard
    "turnlens.export.commands",  # export
    "turnlens.demo",  # demo
)


def _write_catalog(store_dir: Path, segments_glob: str) -> None:
    """Makes a store the collector opened readable: the queries' catalog of views beside the segments."""
    from turnlens.queries.catalog import write_catalog

    write_catalog(store_dir, segments_glob)


# The parts that must not import one another meet here: the collector calls back into the queries.
HOOKS: dict[str, dict[str, Callable[..., object]]] = {
    "turnlens.collector.commands": {"prepare_store": _write_catalog},
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="turnlens", description=__doc__)
    parser.add_argument("--version", action="version", version=f"turnlens {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers, **HOOKS.get(name, {}))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if getattr(args, "store", None):
            layout.check_store_path(args.store)
        return int(args.func(args) or 0)
    except layout.StorePathError as exc:  # --store, or a store a command was configured with (TURNLENS_STORE)
        print(f"turnlens {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
