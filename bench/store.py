"""Measures the store alone: durable rows/s and segments/s under concurrent appenders, and its CPU share.

Closed-loop appenders (like OTLP exporters, each waits for its acknowledgement before sending again)
optionally burn CPU under the GIL before each append, standing in for the collector's decoding, so
the figure shows what group commit costs when decoding competes for the same core.

    .venv/bin/python bench/store.py --seconds 10 --appenders 8 --decode-rate 80000
    taskset -c 0 .venv/bin/python bench/store.py --decode-rate 0      # the store alone, one core
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
from turnlens.collector.store import Store, StoreOverloaded
from turnlens.kernel.schema import SEGMENT_SCHEMA


def synthetic_spans(rows: int, seed: int) -> pa.Table:
    """Spans shaped like the ingest benchmark's: ~12 attributes and 2 events each, unique ids."""
    rng = random.Random(seed)
    now = time.time_ns()
    columns: dict[str, list[object]] = {name: [] for name in SEGMENT_SCHEMA.names}
    for i in range(rows):
        attrs = {f"app.key{k}": f"value-{rng.randrange(10_000)}" for k in range(10)}
        attrs |= {"session.id": f"s{rng.randrange(200)}", "turnlens.turn.id": f"t{rng.randrange(5000)}"}
        events = [
            {"time_unix_nano": now + j, "name": "stream.progress", "attributes": json.dumps({"tokens": j}),
             "dropped_attributes_count": 0, "hlc": (now // 1_000_000 << 16) + j}
            for j in range(2)
        ]
        values = {
            "trace_id": f"{rng.getrandbits(128):032x}", "span_id": f"{seed << 32 | i:016x}",
            "parent_span_id": f"{rng.getrandbits(64):016x}", "flags": 1, "name": "execute_tool send_email",
            "kind": "internal", "start_time_unix_nano": now, "end_time_unix_nano": now + 1_000_000,
            "attributes": json.dumps(attrs), "dropped_attributes_count": 0, "events": events,
            "dropped_events_count": 0, "links": [], "dropped_links_count": 0, "status_code": "ok",
            "resource_attributes": json.dumps({"service.name": "tools", "service.instance.id": "tools-1"}),
            "resource_dropped_attributes_count": 0, "scope_name": "bench",
            "scope_dropped_attributes_count": 0,
            "service_name": "tools", "node": "tools-1", "span_session_id": attrs["session.id"],
            "span_turn_id": attrs["turnlens.turn.id"], "layer": "tool", "hlc": now // 1_000_000 << 16,
            "received_unix_nano": now,
        }
        for name in columns:
            columns[name].append(values.get(name))
    return pa.Table.from_pydict(columns, schema=SEGMENT_SCHEMA)


def burn(seconds: float) -> None:
    """Holds the GIL for `seconds` of CPU, as decoding a request would."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def run(args: argparse.Namespace) -> dict[str, float]:
    tables = [synthetic_spans(args.batch, seed) for seed in range(8)]
    decode_s = args.batch / args.decode_rate if args.decode_rate else 0.0
    stop = threading.Event()
    latencies: list[float] = []
    overloaded = 0

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = Store(Path(tmp), flush_interval_s=args.flush_interval, flush_rows=args.flush_rows,
                      compression=args.compression)

        def appender(k: int) -> None:
            nonlocal overloaded
            i = k
            while not stop.is_set():
                burn(decode_s)
                started = time.perf_counter()
                try:
                    store.append(tables[i % len(tables)])
                except StoreOverloaded as exc:
                    overloaded += 1
                    time.sleep(exc.retry_after_s)
                    continue
                latencies.append(time.perf_counter() - started)
                i += 1

        threads = [threading.Thread(target=appender, args=(k,)) for k in range(args.appenders)]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(args.seconds)
        stop.set()
        for thread in threads:
            thread.join()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        stats = store.stats
        compact_started = time.perf_counter()
        compacted = store.compact(min_segments=2, grace_s=0)
        compact_s = time.perf_counter() - compact_started
        store.close()
    latencies.sort()
    burned = len(latencies) * decode_s
    return {
        "durable_rows_per_s": round(stats.rows_written / wall),
        "segments_per_s": round(stats.segments_written / wall, 1),
        "rows_per_segment": round(stats.rows_written / max(stats.segments_written, 1)),
        "store_cpu_s_per_100k_rows": round((cpu - burned) / max(stats.rows_written, 1) * 100_000, 3),
        "store_rows_per_cpu_s": round(stats.rows_written / max(cpu - burned, 1e-9)),
        "ack_latency_p50_ms": round(latencies[len(latencies) // 2] * 1000, 1) if latencies else 0.0,
        "ack_latency_p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 1) if latencies else 0.0,
        "bytes_per_row": round(stats.bytes_written / max(stats.rows_written, 1), 1),
        "overloaded": overloaded,
        "compaction_rows_per_s": round(compacted.rows / max(compact_s, 1e-9)),
        "compaction_segments_in_out": f"{compacted.replaced_segments} -> {compacted.merged_segments}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--appenders", type=int, default=8, help="concurrent closed-loop appenders")
    parser.add_argument("--batch", type=int, default=512, help="rows per append (spans per OTLP request)")
    parser.add_argument("--decode-rate", type=float, default=0.0, help="simulated decode spans/s; 0: none")
    parser.add_argument("--flush-interval", type=float, default=0.05)
    parser.add_argument("--flush-rows", type=int, default=16_384)
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--dir", default=None, help="where the temporary store goes (default: system tmp)")
    print(json.dumps(run(parser.parse_args()), indent=1))


if __name__ == "__main__":
    main()
