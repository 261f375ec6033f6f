"""Times the catalogue rewrite a refresh ends with, on a store that has derived state: the whole catalogue
(`catalog.write_catalog`: every view bound again) against the copy a new version of the derived state is
published by (`catalog.update_derived`: only the macros naming the version's files and watermark replaced).

    .venv/bin/python bench/catalogue.py --store /tmp/bench-1m --json

A store built by `bench/queries.py --store DIR --keep` serves. Prints each one's wall and CPU seconds per run
(CPU: this process's user + system time, DuckDB's threads included); with `--json` stdout holds only that
one object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
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
        "--json", action="store_true", help="stdout holds only the figures, as one JSON object"
    )
    args = parser.parse_args()
    if derived_manifest.current_snapshot(args.store) is None:
        print(f"{args.store} has no derived state: run `turnlens materialize` first", file=sys.stderr)
        return 2
    results: dict[str, object] = {"load_average_1m": round(os.getloadavg()[0], 2)}
    for name, write in (("whole", catalog.write_catalog), ("copy", catalog.update_derived)):
        walls, cpus = [], []
        for _ in range(args.repeat):
            started, cpu = time.perf_counter(), time.process_time()
            write(args.store, segments_glob(args.store))
            walls.append(round(time.perf_counter() - started, 3))
            cpus.append(round(time.process_time() - cpu, 3))
        results[name] = {"wall_s": walls, "cpu_s": cpus}
        if not args.json:
            print(f"{name:6} wall {walls} s, CPU {cpus} s")
    results["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
