"""Times the analytic views over a large store built from the simulator's fast mode, against the targets:
all of `divergences` over 10M spans < 5 s, one turn's `turn_timeline` < 100 ms,
`slo_cancel_to_ack` over 24 h < 1 s.

    .venv/bin/python bench/queries.py                         # 10M spans (minutes to build the store)
    .venv/bin/python bench/queries.py --spans 1000000 --store /tmp/bench-1m --keep
    .venv/bin/python bench/queries.py --store /tmp/bench-1m   # reuse a store built before

The store is built from OTLP protobuf requests decoded by collector/otlp_decode.py and written as
segments by collector/segments.py, the size and order compaction leaves them (sorted by trace_id). The
per-turn views read the store's derived state (queries/materialize.py), as they do under a running collector:
the script runs a full build (`turnlens materialize --full`, in a child process whose peak RSS is read from
the
kernel) and reports its time and memory, then stores `--fresh` spans of new turns (ids and start times made
new,
received now) and times the refresh that folds them in (`refresh_s`), then re-sends `--fresh` stored spans as
new copies of old turns (a retried export) and times that refresh too (`refresh_retry_s`); both write deltas,
and a last run folds them into the partitions' files (`refresh_fold_s`). Figures go to
stdout
as JSON too; with `--json` that one object is all stdout holds (the rest goes to stderr).

    .venv/bin/python bench/queries.py --spans 1000000 --json

With `--resume` it then starts another full build, kills it (SIGKILL) once half its partitions are published,
and times the run that finishes it (`resumed_s`; it computes only the buckets not yet published):

    .venv/bin/python bench/queries.py --spans 200000 --hours 20 --bucket-spans 20000 --resume --fresh 0 --json

With `--shared-keys N` the first N idempotency keys of the simulation are the same in every copy, stored
and new (a client reusing keys across sessions): a key is then carried by turns of every copy, and the
refresh's `refresh_touched_turns` and `refresh_input_copies` say how much of the store the new turns reach,
and "turn queries (a key's duplicate_commit)" times the Turn detail page's queries of the turn naming the
most shared key's duplicate_commit (beside "turn queries (one turn)", the newest turn's).

    .venv/bin/python bench/queries.py --spans 1000000 --shared-keys 1 --json
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm import tqdm
from turnlens.collector import segments
from turnlens.collector.otlp_decode import decode_protobuf
from turnlens.kernel import contract as c
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog, turn_queries
from turnlens.queries import manifest as derived_manifest
from turnlens.sample_data.bulk import build_templates, counted_requests

REPO = Path(__file__).resolve().parent.parent
TARGETS_S = {
    "divergences": 5.0,
    "turn_timeline (one turn)": 0.1,
    "turn queries (one turn)": 1.0,
    "turn queries (a key's duplicate_commit)": 1.0,
    "slo_cancel_to_ack (24 h)": 1.0,
}
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


# one copy of the fast mode's sessions moved `$shift_ns` later: wall clocks, HLCs (columns and attributes) and
# event times together, as a later hour's traffic would be
SHIFTED = """
select * replace (
    start_time_unix_nano + $shift_ns as start_time_unix_nano,
    end_time_unix_nano + $shift_ns as end_time_unix_nano,
    hlc + $shift_hlc as hlc,
    shifted_hlc(attributes, $shift_hlc) as attributes,
    list_transform(events, lambda e: struct_pack(
        time_unix_nano := e.time_unix_nano + $shift_ns,
        name := e.name,
        attributes := shifted_hlc(e.attributes, $shift_hlc),
        dropped_attributes_count := e.dropped_attributes_count,
        hlc := e.hlc + $shift_hlc
    )) as events
)
from copy_rows
"""
SHIFTED_HLC = f"""
create or replace macro shifted_hlc(attributes, shift) as
case when json_exists(attributes, '$."{c.HLC}"')
then json_merge_patch(
    attributes, json_object('{c.HLC}', (attributes ->> '$."{c.HLC}"')::bigint + shift)
)::varchar
else attributes end
"""


def spread_over_hours(con: duckdb.DuckDBPyConnection, table: pa.Table, hour: int) -> pa.Table:
    """The copy's spans moved `hour` hours later (SHIFTED)."""
    return shifted(con, table, hour * 3600 * 1_000_000_000)


def shifted(con: duckdb.DuckDBPyConnection, table: pa.Table, shift_ns: int) -> pa.Table:
    """The spans moved `shift_ns` later, clocks and events together (SHIFTED)."""
    params = {"shift_ns": shift_ns, "shift_hlc": (shift_ns // 1_000_000) << c.HLC_LOGICAL_BITS}
    con.register("copy_rows", table)
    try:
        shifted: pa.Table = con.execute(SHIFTED, params).to_arrow_table()
        return shifted.cast(table.schema)
    finally:
        con.unregister("copy_rows")


def build_store(
    store: Path,
    spans: int,
    segment_rows: int = 500_000,
    hours: int = 1,
    workers: int | None = None,
    shared_keys: int = 0,
) -> None:
    """Decodes the simulator's fast-mode requests with the collector's decoder and writes them as the
    collector's segments, already at the size its compactor merges them to. With `hours` > 1, the fast
    mode's copies are moved later by an hour each `hours`-th of them, in order, so the store holds that many
    hour partitions instead of one (a full build then has buckets to publish one by one) and a segment holds
    an hour or two of them, as a collector's do: it writes spans as they arrive, and compaction merges
    neighbouring segments.

    The requests are dealt out to `workers` processes (default: one per core), each decoding every
    `workers`-th request into its own segments: the same spans as one process writes, in other files.

    Appending through Store one request at a time would measure the store's group commit (each
    append waits until durable), which bench/store.py measures; here only the reads matter.
    """
    root = store / segments.SEGMENTS_DIR
    segments.ensure_layout(root)
    shutil.copy(REPO / "sample_data" / "tool_registry.toml", store / "tool_registry.toml")
    workers = max(1, workers or os.cpu_count() or 1)
    share = functools.partial(_build_share, root, spans, segment_rows, hours, workers, shared_keys)
    if workers == 1:
        share(0)
    else:
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            pool.map(share, range(workers))
    catalog.write_catalog(store, segments_glob(store))


def _build_share(
    root: Path, spans: int, segment_rows: int, hours: int, workers: int, shared_keys: int, worker: int
) -> None:
    """Worker `worker`'s share of build_store: requests number worker, worker + workers, ..."""
    pending: list[pa.Table] = []
    rows = written = 0
    templates = build_templates(shared_keys=shared_keys)
    copies = -(-spans // sum(template.spans for template in templates))
    con = duckdb.connect()
    con.execute(SHIFTED_HLC)

    def flush() -> None:
        nonlocal pending, rows, written
        for day, table in segments.split_by_day(pa.concat_tables(pending)):
            written += 1
            name = f"bench-{worker:02d}-{written:08d}{segments.SEGMENT_SUFFIX}"
            segments.write_sorted_segment(table, root / segments.partition_name(day) / name)
        pending, rows = [], 0

    with tqdm(total=spans, unit="span", desc="building store", disable=worker > 0) as bar:
        for request, (data, count) in enumerate(counted_requests(spans, templates=templates)):
            bar.update(count)
            if request % workers != worker:
                continue
            table = decode_protobuf(data).table
            if hours > 1:
                table = spread_over_hours(con, table, request // len(templates) * hours // copies)
            pending.append(table)
            rows += table.num_rows
            if rows >= segment_rows:
                flush()
    if pending:
        flush()


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


def send_new_turns(store: Path, spans: int, shared_keys: int = 0) -> int:
    """Stores `spans` spans of turns the store has never seen, started and received now: what a refresh under
    a running collector folds in. Copies of the simulator's requests with ids no other copy uses."""
    stored = sum(
        pq.ParquetFile(path).metadata.num_rows
        for path in segments.segment_files(store / segments.SEGMENTS_DIR)
    )
    # the fast mode numbers its copies from 1, a copy being one pass over the templates: the whole copies past
    # every stored span carry ids no stored span has (a copy the store holds part of would touch its turns)
    templates = build_templates(shared_keys=shared_keys)
    per_copy = sum(template.spans for template in templates)
    first_new = -(-stored // per_copy) * len(templates)  # requests before the first copy with nothing stored
    tables = []
    total = first_new // len(templates) * per_copy + spans
    for index, (data, _) in enumerate(counted_requests(total, templates=templates)):
        if index >= first_new:
            tables.append(decode_protobuf(data).table)
    table = pa.concat_tables(tables).slice(0, spans)
    now = time.time_ns()
    # moved to now as a whole, HLCs and event times with the spans (moving the spans alone set every event's
    # wall clock months from its HLC: every turn then looked skewed, which the causal-inversion sort pays for)
    with duckdb.connect() as con:
        con.execute(SHIFTED_HLC)
        table = shifted(con, table, now - int(pc.min(table["start_time_unix_nano"]).as_py()))
    received = table.schema.get_field_index("received_unix_nano")
    table = table.set_column(received, "received_unix_nano", pa.array([now] * table.num_rows, pa.int64()))
    root = store / segments.SEGMENTS_DIR
    for day, part in segments.split_by_day(table):
        segments.write_segment(
            part, root / segments.partition_name(day) / f"bench-new-{now}{segments.SEGMENT_SUFFIX}"
        )
    return int(table.num_rows)


def materialize_child(
    store: Path, threads: int | None, full: bool, fold: bool = False, extra: Sequence[str] = ()
) -> dict[str, Any]:
    """Runs `turnlens materialize` in a child process, as the collector does; returns its summary plus the
    wall time and the child's own peak RSS (DuckDB's native memory included). The peak is the one the child
    reports (`peak_rss_mb`, its address space's high-water mark): the kernel's ru_maxrss of a child starts
    from this process's peak at exec, so after this process built a store it would report that instead."""
    command = [
        sys.executable,
        "-m",
        "turnlens.cli",
        "materialize",
        "--store",
        str(store),
        "--margin",
        "0",
        "--json",
    ]
    command += ["--full"] if full else []
    command += ["--fold"] if fold else []
    command += ["--threads", str(threads)] if threads else []
    command += list(extra)
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert child.stdout is not None
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        code = os.waitstatus_to_exitcode(status)
        raise SystemExit(f"turnlens materialize {' '.join(command[3:])} exited {code}")
    summary = json.loads(output.decode().strip().splitlines()[-1])
    return summary | {
        "wall_s": round(wall, 3),
        "peak_rss_mb": summary.get("peak_rss_mb") or round(usage.ru_maxrss / 1024, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
    }


def kill_half_way(store: Path, threads: int | None, extra: Sequence[str]) -> dict[str, Any]:
    """Starts a full build in a child process and kills it (SIGKILL) once half its partitions are published,
    as an OOM kill or a lost machine would; returns when it was killed and what it had published."""
    command = [sys.executable, "-m", "turnlens.cli", "materialize", "--store", str(store), "--margin", "0"]
    command += ["--full", "--quiet", *(["--threads", str(threads)] if threads else []), *extra]
    started = time.perf_counter()
    child = subprocess.Popen(command)
    while child.poll() is None:
        found = derived_manifest.read_manifest(store)
        total = found.partitions_total if found is not None else None
        if found is not None and total and 0 < len(found.partitions) >= total / 2:
            child.send_signal(signal.SIGKILL)
            child.wait()
            return {
                "killed_after_s": round(time.perf_counter() - started, 3),
                "published_partitions": len(found.partitions),
                "partitions_total": total,
            }
        time.sleep(0.05)
    raise SystemExit("the full build ended before half its partitions were published: lower --bucket-spans")


def timed(run: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return times, result


say = print  # progress and human-readable figures (stderr with --json)


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
        "--spill-dir", type=Path, default=None, help="the materialiser's --spill-dir (default: in the store)"
    )
    parser.add_argument(
        "--fresh",
        type=int,
        default=10_000,
        help="spans of new turns (then re-sent spans) before timing a refresh",
    )
    parser.add_argument(
        "--full", action="store_true", help="time a full build even when the store has derived state"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="also kill a full build (kill -9) once half its partitions are published, and time the run"
        " that finishes it",
    )
    parser.add_argument(
        "--bucket-spans", type=int, default=None, help="stored copies per bucket of the full builds"
    )
    parser.add_argument(
        "--hours",
        type=int,
        default=1,
        help="when building: spread the spans over this many hour partitions (default: all in one)",
    )
    parser.add_argument(
        "--shared-keys",
        type=int,
        default=0,
        help="when building and sending new turns: leave this many of the simulation's idempotency keys the"
        " same in every copy (a client reusing keys across sessions: each is carried by one turn a copy)",
    )
    parser.add_argument(
        "--json", action="store_true", help="stdout holds only the figures, as one JSON object"
    )
    args = parser.parse_args()
    global say
    if args.json:
        say = functools.partial(print, file=sys.stderr)

    store = args.store or Path(tempfile.mkdtemp(prefix="turnlens-bench-"))
    if not (store / catalog.CATALOG_FILE).exists():
        start = time.perf_counter()
        build_store(store, args.spans, hours=args.hours, shared_keys=args.shared_keys)
        say(f"built {store} in {time.perf_counter() - start:.0f} s")
    else:
        catalog.write_catalog(store, segments_glob(store))  # the views of this checkout

    # every figure's key is present; a figure this run did not take (a store reused with its derived state and
    # no --full, --fresh 0) is null
    results: dict[str, Any] = {
        "load_average_1m": round(os.getloadavg()[0], 2),
        "shared_keys": args.shared_keys,
        "spans": None,
        "full_build_s": None,
        "full_build_peak_rss_mb": None,
        "refresh_s": None,
    }
    spill = ["--spill-dir", str(args.spill_dir)] if args.spill_dir else []
    buckets = [*spill, *(["--bucket-spans", str(args.bucket_spans)] if args.bucket_spans else [])]
    if args.full or derived_manifest.current_snapshot(store) is None:
        full = materialize_child(store, args.threads, full=True, extra=buckets)
        say(
            f"full build: {full['seconds']:.1f} s ({full['cpu_s']:.0f} CPU s) in {full['buckets']} buckets,"
            f" {full['partitions']} partitions, peak RSS {full['peak_rss_mb']:.0f} MB"
        )
        results |= {
            "full_build_s": full["seconds"],
            "full_build_cpu_s": full["cpu_s"],
            "full_build_peak_rss_mb": full["peak_rss_mb"],
            "full_build_step_s": full["step_seconds"],
            "full_build_step_cpu_s": full["step_cpu_seconds"],
            # the units, the turns whose key facts other units count, the copies the shuffle wrote for them
            "full_build_units": full.get("units"),
            "full_build_key_fact_turns": full.get("key_fact_turns"),
            "full_build_shuffle_copies": full.get("shuffle_copies"),
            "load_average_1m_after_full_build": round(os.getloadavg()[0], 2),
        }
    if args.resume:
        killed = kill_half_way(store, args.threads, buckets)
        load = round(os.getloadavg()[0], 2)
        resumed = materialize_child(store, args.threads, full=False, extra=buckets)
        say(
            f"full build killed after {killed['killed_after_s']:.1f} s with {killed['published_partitions']}"
            f" of {killed['partitions_total']} partitions published; the next run finished it in"
            f" {resumed['seconds']:.1f} s ({resumed['cpu_s']:.0f} CPU s): {resumed['buckets_reused']} buckets"
            f" kept, {resumed['buckets_built']} of {resumed['buckets']} built"
        )
        results |= {
            "resume_killed_after_s": killed["killed_after_s"],
            "resume_killed_partitions": killed["published_partitions"],
            "resume_partitions_total": killed["partitions_total"],
            "load_average_1m_before_resume": load,
            "resumed_s": resumed["seconds"],
            "resumed_cpu_s": resumed["cpu_s"],
            "resumed_buckets_reused": resumed["buckets_reused"],
            "resumed_buckets_built": resumed["buckets_built"],
            "resumed_step_s": resumed["step_seconds"],
        }
    if args.fresh:
        sent = send_new_turns(store, args.fresh, args.shared_keys)
        load = round(os.getloadavg()[0], 2)
        refresh = materialize_child(store, args.threads, full=False, extra=spill)
        say(
            f"refresh after {sent} spans of new turns: {refresh['seconds']:.2f} s"
            f" ({refresh['wall_s']:.1f} s with the interpreter), {refresh['touched_turns']} turns,"
            f" partitions {refresh['written_partitions']}, peak RSS {refresh['peak_rss_mb']:.0f} MB"
        )
        results |= {
            "load_average_1m_before_refresh": load,
            "refresh_s": refresh["seconds"],
            "refresh_cpu_s": refresh["cpu_seconds"],
            "refresh_touched_turns": refresh["touched_turns"],
            "refresh_input_copies": refresh["input_copies"],
            "refresh_peak_rss_mb": refresh["peak_rss_mb"],
            "refresh_step_s": refresh["step_seconds"],
            "refresh_step_cpu_s": refresh["step_cpu_seconds"],
        }
        resent = resend_as_fresh(store, args.fresh)
        retry = materialize_child(store, args.threads, full=False, extra=spill)
        say(
            f"refresh after {resent} re-sent stored spans: {retry['seconds']:.2f} s, {retry['touched_turns']}"
            f" turns in {len(retry['written_partitions'])} partitions"
        )
        results |= {"refresh_retry_s": retry["seconds"], "refresh_retry_cpu_s": retry["cpu_seconds"]}
        fold = materialize_child(store, args.threads, full=False, fold=True, extra=spill)
        folded = len(fold["folded_partitions"])
        say(f"fold of the deltas into {folded} partitions' files: {fold['seconds']:.2f} s")
        results |= {
            "refresh_fold_s": fold["seconds"],
            "refresh_fold_cpu_s": fold["cpu_seconds"],
            "refresh_fold_partitions": folded,
            "refresh_fold_step_s": fold["step_seconds"],
        }
    con = catalog.connect(store)
    if args.threads:
        con.execute(f"set threads = {int(args.threads)}")  # SET takes no bound parameters
    try:
        # the spans counted once (a retried copy is the same span) from the stored copies' keys, the turns
        # from the derived state, as the `store_summary` named query counts them (the live `spans` view over
        # the whole store grew past 21 GB at 30M spans)
        [(spans,)] = con.execute(
            "select count(*) from (select distinct trace_id, span_id from span_copies())"
        ).fetchall()
        [(turns,)] = con.execute("select count(*) from turns").fetchall()
        results["spans"] = spans
        say(f"store: {spans} spans, {turns} turns")
        # the newest turn, from the derived per-turn state: the `turn_ids` named query groups every resolved
        # span of the store (18.6 s and 9.2 GB at 10M spans), more than the figures below measure
        [(session, turn)] = con.execute(
            "select session_id, turn_id from turns order by started_wall_ns desc, turn_id limit 1"
        ).fetchall()

        def measure(label: str, run: Callable[[], Any]) -> None:
            times, rows = timed(run, args.repeat)
            median = statistics.median(times)
            target = TARGETS_S.get(label)
            verdict = (
                "" if target is None else ("  within target" if median < target else f"  OVER {target} s")
            )
            say(
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
        # every query of the Turn detail page and the export, one turn held (queries/turn/): the newest turn,
        # and the turn naming a duplicate_commit of the key the most turns carry (with --shared-keys, one key
        # of every copy), which reads the facts kept of the other turns carrying it
        names = sorted(turn_queries.load())

        def turn_queries_of(held: tuple[str, str]) -> int:
            answers = turn_queries.run_all(
                con, [held[0]], [held[1]], names, lambda found: len(found.fetchall())
            )
            return sum(rows for rows in answers.values() if isinstance(rows, int))

        measure("turn queries (one turn)", functools.partial(turn_queries_of, (session, turn)))
        shared = con.execute(
            "select k.session_id, k.turn_id from divergences as k"
            " join (select idempotency_key, count(distinct turn_id) as turns from side_effects"
            "       where idempotency_key is not null group by all order by turns desc limit 1) using"
            " (idempotency_key) where k.kind = 'duplicate_commit' and turns > 1"
        ).fetchall()
        if shared:
            hot = functools.partial(turn_queries_of, shared[0])
            measure("turn queries (a key's duplicate_commit)", hot)
        slo = {"window_size": "1m", "hours": "24"}
        measure("slo_cancel_to_ack (24 h)", lambda: len(catalog.run_named(con, "slo_recent", slo).fetchall()))
        if args.all_views:
            for view in EVERY_VIEW:
                measure(view, functools.partial(read_all, con, view))
    except duckdb.Error as exc:
        say(f"query failed: {exc}")
        return 1
    finally:
        con.close()
        if args.store is None and not args.keep:
            shutil.rmtree(store, ignore_errors=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
