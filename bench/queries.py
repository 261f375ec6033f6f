"""Times the analytic views over a large store built from the simulator's fast mode, against the targets:
all of `divergences` over 10M spans < 5 s, one turn's `turn_timeline` < 100 ms,
`slo_cancel_to_ack` over 24 h < 1 s.

    .venv/bin/python bench/queries.py                         # 10M spans (minutes to build the store)
    .venv/bin/python bench/queries.py --spans 1000000 --store /tmp/bench-1m --keep
    .venv/bin/python bench/queries.py --store /tmp/bench-1m   # reuse a store built before

The store is built from OTLP protobuf requests decoded by collector/otlp_decode.py and written as
segments by collector/segments.py, the size and order compaction leaves them (sorted by trace_id). The
per-turn views read the store's snapshot (queries/materialize.py), as they do under a running collector:
the script writes a full one when the store has none and reports how long it took, then re-sends
`--fresh` spans as new copies (a retried export) and times the refresh that folds them in. Figures go
to stdout as JSON too.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm
from turnlens.collector import segments
from turnlens.collector.otlp_decode import decode_protobuf
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog, materialize
from turnlens.sample_data.bulk import counted_requests

REPO = Path(__file__).resolve().parent.parent
TARGETS_S = {"divergences": 5.0, "turn_timeline (one turn)": 0.1, "slo_cancel_to_ack (24 h)": 1.0}
EVERY_VIEW = (
    "turns",
    "turn_timeline",
    "layer_verdicts",
    "side_effects",
    "divergences",
    "cancel_acks",
    "slo_cancel_to_ack",
    "node_skew",
    "budget_breaches",
    "partial_store_rate",
    "turn_usage",
    "tool_registry",
    "tool_audit",
)


def build_store(store: Path, spans: int, segment_rows: int = 500_000) -> None:
    """Decodes the simulator's fast-mode requests with the collector's decoder and writes them as the
    collector's segments, already at the size its compactor merges them to.

    Appending through Store one request at a time would measure the store's group commit (each
    append waits until durable), which bench/store.py measures; here only the reads matter.
    """
    root = store / segments.SEGMENTS_DIR
    segments.ensure_layout(root)
    shutil.copy(REPO / "sample_data" / "tool_registry.toml", store / "tool_registry.toml")
    pending: list[pa.Table] = []
    rows = written = 0

    def flush() -> None:
        nonlocal pending, rows, written
        for day, table in segments.split_by_day(pa.concat_tables(pending)):
            written += 1
            name = f"bench-{written:08d}{segments.SEGMENT_SUFFIX}"
            segments.write_sorted_segment(table, root / segments.partition_name(day) / name)
        pending, rows = [], 0

    with tqdm(total=spans, unit="span", desc="building store") as bar:
        for data, count in counted_requests(spans):
            table = decode_protobuf(data).table
            pending.append(table)
            rows += table.num_rows
            bar.update(count)
            if rows >= segment_rows:
                flush()
    if pending:
        flush()
    catalog.write_catalog(store, segments_glob(store))


def resend_as_fresh(store: Path, spans: int) -> int:
    """Writes `spans` stored rows again as a segment received now: a retried export a refresh folds in."""
    source = next(
        p for p in sorted(segments.segment_files(store / segments.SEGMENTS_DIR)) if "1970" not in str(p)
    )
    table = pq.read_table(source).slice(0, spans)
    received = table.schema.get_field_index("received_unix_nano")
    table = table.set_column(
        received, "received_unix_nano", pa.array([time.time_ns()] * table.num_rows, pa.int64())
    )
    segments.write_segment(table, source.parent / f"bench-fresh-{time.time_ns()}{segments.SEGMENT_SUFFIX}")
    return int(table.num_rows)


def read_all(con: duckdb.DuckDBPyConnection, view: str) -> int:
    """Reads every row of a view (as the dashboard or an export would), returning the row count."""
    return int(catalog.read_view(con, view).to_arrow_table().num_rows)


def timed(run: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return times, result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=10_000_000, help="spans to generate when building")
    parser.add_argument("--store", type=Path, default=None, help="reuse (or build into) this store")
    parser.add_argument("--keep", action="store_true", help="keep a temporary store afterwards")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (the median is reported)")
    parser.add_argument("--all-views", action="store_true", help="also time a full read of every view")
    parser.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: all cores)")
    parser.add_argument(
        "--fresh", type=int, default=10_000, help="spans re-sent before timing a refresh (0: none)"
    )
    args = parser.parse_args()

    store = args.store or Path(tempfile.mkdtemp(prefix="turnlens-bench-"))
    if not (store / catalog.CATALOG_FILE).exists():
        start = time.perf_counter()
        build_store(store, args.spans)
        print(f"built {store} in {time.perf_counter() - start:.0f} s")
    else:
        catalog.write_catalog(store, segments_glob(store))  # the views of this checkout

    results: dict[str, Any] = {}
    glob = segments_glob(store)
    if materialize.current_snapshot(store) is None:
        full = materialize.materialize(store, glob, margin_s=0, threads=args.threads)
        print(f"full snapshot: {full['seconds']:.0f} s in {full['buckets']} buckets; rows {full['rows']}")
        results["snapshot_full_s"] = full["seconds"]
    if args.fresh:
        resent = resend_as_fresh(store, args.fresh)
        refresh = materialize.materialize(store, glob, margin_s=0, threads=args.threads)
        print(
            f"refresh after {resent} re-sent spans: {refresh['seconds']:.1f} s,"
            f" {refresh.get('touched_turns')} turns recomputed ({refresh['mode']})"
        )
        results["snapshot_refresh_s"] = refresh["seconds"]
        results["snapshot_refresh_fresh_copies"] = refresh["fresh_copies"]
    con = catalog.connect(store)
    if args.threads:
        con.execute(f"set threads = {int(args.threads)}")  # SET takes no bound parameters
    try:
        [summary] = catalog.run_named(con, "store_summary", {}).fetchall()
        results["spans"] = summary[0]
        print(f"store: {summary[0]} spans, {summary[3]} turns, {summary[4]} .. {summary[5]}")
        [(session, turn, *_)] = catalog.run_named(con, "turn_ids", {"limit": "1"}).fetchall()

        def measure(label: str, run: Callable[[], Any]) -> None:
            times, rows = timed(run, args.repeat)
            median = statistics.median(times)
            target = TARGETS_S.get(label)
            verdict = (
                "" if target is None else ("  within target" if median < target else f"  OVER {target} s")
            )
            print(
                f"{label:32} {median * 1000:9.0f} ms  (runs: {', '.join(f'{t:.2f}' for t in times)} s;"
                f" {rows} rows){verdict}"
            )
            results[label] = {
                "median_s": round(median, 4),
                "runs_s": [round(t, 4) for t in times],
                "rows": rows,
            }

        measure("divergences", functools.partial(read_all, con, "divergences"))
        measure(
            "turn_timeline (one turn)",
            lambda: len(
                catalog.run_named(con, "turn_timeline_of", {"session": session, "turn": turn}).fetchall()
            ),
        )
        slo = {"window_size": "1m", "hours": "24"}
        measure("slo_cancel_to_ack (24 h)", lambda: len(catalog.run_named(con, "slo_recent", slo).fetchall()))
        if args.all_views:
            for view in EVERY_VIEW:
                measure(view, functools.partial(read_all, con, view))
    except duckdb.Error as exc:
        print(f"query failed: {exc}")
        return 1
    finally:
        con.close()
        if args.store is None and not args.keep:
            shutil.rmtree(store, ignore_errors=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
