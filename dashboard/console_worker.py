"""The SQL console's worker process: seals itself first, then opens the catalog and answers queries.

Started by `console.Sandbox` as `python -m turnlens.dashboard.console_worker STORE CATALOG [MEMORY_LIMIT]`,
CATALOG a copy of the store's catalog in a private folder of the dashboard's. Landlock binds the thread that
asks for it and every thread that thread starts later, not threads already running; so the seal comes first,
while the process has one thread, and DuckDB, NumPy and Arrow start theirs inside it. After the seal this
process can read the store's segments and derived folders, the folder of catalog copies and Python's
installation, and write nothing anywhere. Landlock grants a file by the file itself, not its name: a worker
granted the store's catalog could not read the next one the collector renames into place, where a folder's
grant covers every copy the dashboard puts in it later, so the worker reopens a new copy instead of being
started again (seconds on a loaded machine) each time the catalog changes.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import struct
import sys
from pathlib import Path

from turnlens.dashboard import landlock

CATALOG_FILE = (
    "turnlens.duckdb"  # queries.catalog.CATALOG_FILE; importing it would start threads before the seal
)
READ_FOLDERS = ("segments", "derived")
PACKAGES = ("turnlens", "turnlens.dashboard", "turnlens.queries", "turnlens.collector", "turnlens.kernel")
# shared libraries (DuckDB and NumPy load theirs at import), time zones, and what DuckDB reads of its limits
SYSTEM_READS = (
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/etc/ld.so.cache",
    "/usr/share/zoneinfo",
    "/etc/localtime",
    "/proc/meminfo",
    "/proc/self",
    "/sys/fs/cgroup",
)


def python_folders(store_dir: Path) -> list[Path]:
    """Where Python may import from after the seal; never the store or a folder holding it."""
    folders = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)}
    folders |= {Path(p) for p in sys.path if p and Path(p).is_dir()}
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None:
            folders |= {Path(p) for p in spec.submodule_search_locations or []}
    store = store_dir.resolve()
    return sorted(f.resolve() for f in folders if f.resolve() not in (store, *store.parents))


def readable(store_dir: Path, copies: Path) -> list[Path]:
    """Everything the worker may open after the seal: `copies` is the folder of catalog copies."""
    store = [copies] + [store_dir / name for name in READ_FOLDERS]
    return store + python_folders(store_dir) + [Path(p) for p in SYSTEM_READS]


def seal(store_dir: Path, copies: Path) -> None:
    """Landlock on this process while it has a single thread (see the module's docstring)."""
    threads = os.listdir("/proc/self/task")
    if len(threads) != 1:
        raise landlock.LandlockUnavailable(
            f"{len(threads)} threads run before the seal; it would bind only one"
        )
    landlock.restrict_to_reading(readable(store_dir, copies))


def _refuse(reason: str) -> int:
    body = pickle.dumps(("error", reason))
    sys.stdout.buffer.write(struct.pack("!I", len(body)) + body)
    sys.stdout.buffer.flush()
    return 1


def main(argv: list[str]) -> int:
    store_dir = Path(argv[0]).resolve()
    catalog_file = Path(argv[1]).resolve()
    memory_limit = argv[2] if len(argv) > 2 else None
    try:
        seal(store_dir, catalog_file.parent)
    except landlock.LandlockUnavailable as exc:
        return _refuse(str(exc))
    from turnlens.dashboard import console  # after the seal: DuckDB's and NumPy's threads are bound too

    def open_catalog(path: Path) -> console.duckdb.DuckDBPyConnection:
        return console.open_sealed_catalog(path, [store_dir / n for n in READ_FOLDERS], memory_limit)

    try:
        con = open_catalog(catalog_file)
    except console.duckdb.Error as exc:
        return _refuse(str(exc))
    console.write_frame(sys.stdout.buffer, ("ready",))
    console.serve(con, sys.stdin.buffer, sys.stdout.buffer, catalog_file=catalog_file, reopen=open_catalog)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
