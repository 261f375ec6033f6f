"""Times the catalogue rewrite a refresh ends with, on a store that has derived state: the whole catalogue
(`catalog.write_catalog`: every view bound again) against the copy a new version of the derived state is
published by (`catalog.update_derived`: only the macros naming the version's files and watermark replaced).

    .venv/bin/python bench/catalogue.py --store /tmp/bench-1m --json

A store built by `bench/queries.py --store DIR --keep` serves. Prints each one's wall and CPU seconds per run
(CPU: this process's user + system time, DuckDB's threads included); with `--json` stdout holds only that
one object.

With `--partitions N` it times them on a copy of the store whose manifest names N partitions (30 days of hour
partitions are 720), each a link to the files of the store's first partition: what a version's catalogue costs
as the partitions pile up, without a store that size.

    .venv/bin/python bench/catalogue.py --store /tmp/bench-1m --partitions 720 --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog
from turnlens.queries import manifest as derived_manifest


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", type=Path, required=True, help="a store with derived state")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each")
    parser.add_argument(
        "--partitions", type=int, default=None, help="on a copy of the store naming this many partitions"
    )
    parser.add_argument(
        "--json", action="store_true", help="stdout holds only the figures, as one JSON object"
    )
    args = parser.parse_args()
    if derived_manifest.current_snapshot(args.store) is None:
        print(f"{args.store} has no derived state: run `turnlens materialize` first", file=sys.stderr)
        return 2
    store = args.store
    if args.partitions:
        store = Path(tempfile.mkdtemp(prefix="turnlens-catalogue-")) / "store"
        with_partitions(args.store, store, args.partitions)
    results: dict[str, object] = {
        "load_average_1m": round(os.getloadavg()[0], 2),
        "partitions": args.partitions,
    }
    for name, write in (("whole", catalog.write_catalog), ("copy", catalog.update_derived)):
        walls, cpus = [], []
        for _ in range(args.repeat):
            started, cpu = time.perf_counter(), time.process_time()
            write(store, segments_glob(store))
            walls.append(round(time.perf_counter() - started, 3))
            cpus.append(round(time.process_time() - cpu, 3))
        results[name] = {"wall_s": walls, "cpu_s": cpus}
        if not args.json:
            print(f"{name:6} wall {walls} s, CPU {cpus} s")
    results["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    if args.partitions:
        shutil.rmtree(store.parent)
    print(json.dumps(results))
    return 0


def with_partitions(source: Path, store: Path, partitions: int) -> None:
    """A copy of `source` (its derived files linked, not copied) whose manifest names `partitions` partitions:
    the first one's, and links to its files under made-up partition names before it."""
    shutil.copytree(source, store, symlinks=True, ignore=shutil.ignore_patterns(catalog.CATALOG_FILE))
    current = store / derived_manifest.DERIVED_DIR / derived_manifest.CURRENT_FILE
    state = json.loads(current.read_text())
    part, version = next(iter(sorted(state["partitions"].items())))
    for n in range(partitions - len(state["partitions"])):
        name = f"19700101T{n:06d}"
        state["partitions"][name] = version
        for table in derived_manifest.TABLES:
            folder = store / derived_manifest.DERIVED_DIR / table
            (folder / f"p={name}").mkdir()
            (folder / f"p={name}" / f"v{version}.parquet").symlink_to(
                folder / f"p={part}" / f"v{version}.parquet"
            )
    current.write_text(json.dumps(state))
    catalog.write_catalog(store, segments_glob(store))


if __name__ == "__main__":
    raise SystemExit(main())
