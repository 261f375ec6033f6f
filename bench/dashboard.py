"""Times each dashboard page's data on a large store: the target is under 1 s a page at 1M spans.

Every page runs in Streamlit's AppTest with the result cache cleared first, so each run reads the
store; the figure per page is the sum of its named queries (what the dashboard waits on), beside
the whole script run (queries plus rendering in AppTest). The store-wide pages read the per-turn
views from the store's snapshot (`turnlens materialize`, as the collector keeps it; the bench runs it
after building a store), so it first says which snapshot it reads.

    .venv/bin/python bench/dashboard.py                              # builds a 1M-span store first
    .venv/bin/python bench/dashboard.py --store /tmp/bench-1m        # reuse a store (bench/queries.py --keep)
    .venv/bin/python bench/dashboard.py --store DIR --live-views      # the per-turn views computed live
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "dashboard" / "app.py"
TARGET_S = 1.0
PAGES = ("overview", "turns", "turn_detail", "side_effects", "tools", "alerts", "sql_console")


def _build_store(store: Path, spans: int) -> None:
    """The same store bench/queries.py builds: the simulator's fast mode through the collector's store."""
    sys.path.insert(0, str(REPO / "bench"))
    from queries import build_store  # bench/queries.py, importable by name: its workers are spawned

    build_store(store, spans)
    # the collector keeps the per-turn views materialised (`turnlens materialize`); so does the bench
    turnlens = str(Path(sys.executable).with_name("turnlens"))
    subprocess.run([turnlens, "materialize", "--store", str(store), "--margin", "0", "--quiet"], check=True)


def _a_cancelled_turn(store: Path) -> tuple[str, str]:
    """A cancelled turn, read through the dashboard's own hardened, memory-limited connection."""
    from turnlens.dashboard import data

    cursor = data._Catalog(store).cursor()[0]
    frame = data.run_named(cursor, "cancel_latencies", {"from_ms": None, "to_ms": None})
    return str(frame["session_id"].iloc[-1]), str(frame["turn_id"].iloc[-1])


def _snapshot_note(store: Path) -> str:
    """Which snapshot the per-turn views read: the store-wide pages' figures depend on there being one."""
    from turnlens.dashboard import data
    from turnlens.queries import catalog

    con = catalog.connect(store)
    try:
        frame = data.run_named(con, "snapshot_time", {})
    except data.StoreNotReady:
        frame = None
    finally:
        con.close()
    if frame is None or not len(frame):
        return "no snapshot: the per-turn views are computed live (run `turnlens materialize` first)"
    watermark_ms, built_ms = int(frame["watermark_ms"].iloc[0]), int(frame["built_ms"].iloc[0])
    received = datetime.fromtimestamp(watermark_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    built_after_s = (built_ms - watermark_ms) / 1000
    return f"snapshot of the spans received up to {received} UTC, built {built_after_s:.0f} s later"


def _run_page(page: str, params: dict[str, str]) -> tuple[float, float, list[tuple[str, float]]]:
    from streamlit.testing.v1 import AppTest
    from turnlens.dashboard import data

    data.refresh()
    data.TIMINGS.clear()
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params.update(params)
    at.switch_page(f"pages/{page}.py")  # straight to the page: the default page's queries are not counted
    started = time.perf_counter()
    at.run()
    total = time.perf_counter() - started
    if at.exception:
        raise RuntimeError(f"{page}: {at.exception[0].message}")
    queries = list(data.TIMINGS)
    return sum(t for _, t in queries), total, queries


LIVE_VIEWS = ("turns", "cancel_acks", "divergences", "side_effects", "turn_events")


def _live_views(store: Path, views: list[str], repeat: int) -> dict[str, float]:
    """Median seconds to read every row of each view as computed live from the segments, in a catalogue of
    the store's views without its snapshot (what the pages read before the first snapshot is built)."""
    from turnlens.queries import catalog

    con = catalog.live_connection(store)
    timings = {}
    for view in views:
        runs = []
        for _ in range(repeat):
            started = time.perf_counter()
            con.execute(f"select * from {view}").fetchall()  # a name from LIVE_VIEWS, not a value
            runs.append(time.perf_counter() - started)
        timings[view] = round(statistics.median(runs), 4)
        print(f"live {view:13} {timings[view] * 1000:7.0f} ms (median of {repeat})", flush=True)
    con.close()
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", type=Path, default=None, help="reuse (or build into) this store")
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans to generate when building")
    parser.add_argument("--repeat", type=int, default=3, help="runs per page (the median is reported)")
    parser.add_argument("--pages", nargs="+", choices=PAGES, default=list(PAGES), help="pages to time")
    parser.add_argument(
        "--live-views",
        nargs="*",
        choices=LIVE_VIEWS,
        default=None,
        help="instead of the pages, time these views computed live (all of them when none is named)",
    )
    args = parser.parse_args()
    if args.live_views is not None:
        if not (args.store and (args.store / "turnlens.duckdb").exists()):
            parser.error("--live-views reads an existing store: give it with --store")
        live = _live_views(args.store, args.live_views or list(LIVE_VIEWS), args.repeat)
        print(json.dumps({"store": str(args.store), "live_views_median_s": live}))
        return 0

    store = args.store or Path(tempfile.mkdtemp(prefix="turnlens-dashboard-bench-"))
    if not (store / "turnlens.duckdb").exists():
        started = time.perf_counter()
        _build_store(store, args.spans)
        print(f"built {store} in {time.perf_counter() - started:.0f} s")
    os.environ["TURNLENS_STORE"] = str(store)
    print(_snapshot_note(store))
    session_id, turn_id = _a_cancelled_turn(store)
    page_params = {
        "turn_detail": {"session": session_id, "turn": turn_id},
        "sql_console": {"sql": "select kind, count(*) from divergences group by all"},
    }

    results: dict[str, Any] = {"store": str(store)}
    for page in args.pages:
        runs = [_run_page(page, page_params.get(page, {})) for _ in range(args.repeat)]
        data_s = statistics.median(r[0] for r in runs)
        total_s = statistics.median(r[1] for r in runs)
        slowest = max(runs[-1][2], key=lambda q: q[1], default=("-", 0.0))
        verdict = "within target" if data_s < TARGET_S else f"OVER {TARGET_S:g} s"
        print(
            f"{page:13} data {data_s * 1000:7.0f} ms  page run {total_s * 1000:7.0f} ms  "
            f"({len(runs[-1][2])} queries, slowest {slowest[0]} {slowest[1] * 1000:.0f} ms)  {verdict}"
        )
        results[page] = {
            "data_median_s": round(data_s, 4),
            "page_run_median_s": round(total_s, 4),
            "queries": {name: round(t, 4) for name, t in runs[-1][2]},
        }
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
