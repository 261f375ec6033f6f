"""The derived state's full build on DuckDB in one process and on Spark, over the same store: wall time, peak
memory, and the cost of one bucket task, projected to more workers.

    .venv/bin/python bench/spark.py --spans 1000000 --json
    .venv/bin/python bench/spark.py --store /tmp/bench-1m --master 'local[2]'   # reuse a store built before
    .venv/bin/python bench/spark.py --spans 10000000 --hours 30 --bucket-spans 250000 --engines spark

The store is built as bench/queries.py builds it (the simulator's fast mode through the collector's decoder
and segment writer). Each build is `turnlens materialize --full` in a child process: `--threads 2` on DuckDB,
`--engine spark --master MASTER` on Spark, both with `--bucket-spans` (default 25,000: several tasks even on
a small store). The default master is `local-cluster[2,1,2048]`: two executor JVMs of one core each, as two
executors of a cluster would be (`local[2]` runs both in the driver's JVM). DuckDB's peak RSS is the child's
(`ru_maxrss`); on Spark, `driver_peak_rss_mb` is the driver's Python process (its JVM is not counted) and
each worker's peak is its Python worker's own (the task's DuckDB memory is in it; the executor JVMs' is not).

The projection to N workers: the driver's serial part (the whole-store identity, the index, publishing:
the build's wall time less the time the tasks were running) plus the tasks' total seconds spread over N
workers, never below the stages' critical path (the identity's chunks, a batch of the shuffle, the longest
unit). With `--json` stdout holds one JSON object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from turnlens.collector import segments

sys.path.insert(0, str(Path(__file__).resolve().parent))
from queries import build_store, materialize_child  # noqa: E402  bench/queries.py: its store, its child run

PROJECT_TO = (2, 4, 8, 16, 32)


def driver_step_seconds(summary: dict[str, Any]) -> dict[str, float]:
    """Seconds of each of the driver's own steps (the index, the identity, the shuffle, templates,
    publishing): every step of the build's summary but the Spark tasks'."""
    return {step: s for step, s in summary["step_seconds"].items() if not step.startswith("spark ")}


def largest_driver_steps(summary: dict[str, Any], count: int = 6) -> dict[str, float]:
    """The driver's largest steps, in seconds: which of them a larger cluster would have to take over."""
    steps = sorted(driver_step_seconds(summary).items(), key=lambda item: -item[1])
    return {step: round(s, 1) for step, s in steps[:count]}


def projection(spark: dict[str, Any]) -> dict[str, float]:
    """Wall seconds of the same build on N workers, from the measured driver part and task seconds."""
    tasks = spark["spark"]
    workers = task_slots(tasks["master"]) or len(tasks["worker_peak_rss_mb"]) or 1
    # the tasks ran on `workers` workers at once; the rest of the wall time is the driver's
    driver = max(spark["wall_s"] - tasks_wall(tasks, workers), 0.0)
    return {str(n): round(driver + tasks_wall(tasks, n), 1) for n in PROJECT_TO}


def task_slots(master: str) -> int | None:
    """The tasks a local master runs at once (`local[N]`, `local-cluster[N,cores,memory]`): a Python worker
    that Spark replaced mid-build shows as one more worker in the peaks, not as one more slot."""
    found = re.fullmatch(r"local\[(\d+)\]|local-cluster\[(\d+),\s*(\d+),\s*\d+\]", master)
    if found is None:
        return None
    if found.group(1):
        return int(found.group(1))
    return int(found.group(2)) * int(found.group(3))


def tasks_wall(tasks: dict[str, Any], n: int) -> float:
    """Seconds the tasks take on n workers: their total spread over n, and never less than the critical path:
    the identity's chunks (a chunk is ~1M copies whatever the workers, so never less than the longest), a
    batch of the shuffle (cut into one batch per worker, so its total over n), then the longest unit and the
    longest join of slices."""
    identity = max(tasks["identity_task_seconds_total"] / n, tasks["identity_task_seconds_max"])
    # a sliced partition's join follows its last slice
    units = tasks["unit_task_seconds_max"] + tasks["join_task_seconds_max"]
    critical = identity + tasks["shuffle_task_seconds_total"] / n + units
    return max(tasks["task_seconds_total"] / n, critical)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans to generate when building")
    parser.add_argument("--store", type=Path, default=None, help="reuse (or build into) this store")
    parser.add_argument("--master", default="local-cluster[2,1,2048]", help="the Spark master URL")
    parser.add_argument(
        "--bucket-spans", type=int, default=25_000, help="stored copies per bucket: one Spark task each"
    )
    parser.add_argument(
        "--hours",
        type=int,
        default=1,
        help="hour partitions of a store built here (bench/queries.py --hours)",
    )
    parser.add_argument(
        "--engines",
        default="duckdb,spark",
        help="the builds to run: duckdb, spark, or both comma-separated (a large store's in two runs)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = parser.parse_args()
    engines = set(args.engines.split(","))
    if not engines or engines - {"duckdb", "spark"}:
        parser.error(f"--engines: duckdb, spark or both, not {args.engines!r}")
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    temporary = None
    store = args.store
    if store is None:
        temporary = tempfile.TemporaryDirectory(prefix="turnlens-bench-spark-")
        store = Path(temporary.name) / "store"
    if not (store / "segments").is_dir():
        say(f"building a store of {args.spans} spans in {store}")
        build_store(store, args.spans, hours=args.hours)
    spans = sum(pq.ParquetFile(path).metadata.num_rows for path in segments.segment_files(store / "segments"))
    buckets = ["--bucket-spans", str(args.bucket_spans)]
    result: dict[str, Any] = {
        "spans": spans,
        "cores": os.cpu_count(),
        "bucket_spans": args.bucket_spans,
    }
    if "duckdb" in engines:
        say("full build on DuckDB (2 threads, one process)")
        duck = materialize_child(store, 2, full=True, extra=buckets)
        say(f"  {duck['wall_s']} s, peak {duck['peak_rss_mb']} MB")
        result["duckdb"] = {
            key: duck[key] for key in ("wall_s", "cpu_s", "peak_rss_mb", "buckets", "partitions")
        }
    if "spark" in engines:
        say(f"full build on Spark ({args.master})")
        spark_flags = ["--engine", "spark", "--master", args.master, *buckets]
        spark = materialize_child(store, None, full=True, extra=spark_flags)
        say(f"  {spark['wall_s']} s, workers {spark['spark']['worker_peak_rss_mb']}")
        result["spark"] = (
            {key: spark[key] for key in ("wall_s", "buckets", "partitions")}
            | {
                "driver_peak_rss_mb": spark["peak_rss_mb"],
                "driver_steps_s": round(sum(driver_step_seconds(spark).values()), 1),
                "driver_largest_steps_s": largest_driver_steps(spark),
            }
            | spark["spark"]
        )
        result["spark_projected_wall_s_by_workers"] = projection(spark)
    result["load_1min"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=None if args.json else 1))
    if temporary is not None:
        temporary.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
