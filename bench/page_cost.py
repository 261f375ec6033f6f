"""What one dashboard page costs to load, in a real browser, with nothing else running beside it.

Starts `turnlens dashboard --store STORE` on a free port of 127.0.0.1, loads one page `--loads` times in
headless Chromium (after two loads left out: Streamlit's and the browser's start-up), and prints the median
wall time of a load (navigation until the page is shown and its script run is over, as bench/demo_soak.py
counts it) beside the CPU seconds it cost the dashboard's server and the browser's processes. Where
bench/demo_soak.py says whether pages meet their target while the demo runs, this says what a page itself
costs, and what a change to one element of it saves (load the page before and after the change).

    .venv/bin/python bench/page_cost.py --store DIR              # Turn detail of a turn with a finding
    .venv/bin/python bench/page_cost.py --store DIR --page alerts --loads 20
    .venv/bin/python bench/page_cost.py --store DIR --json       # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from playwright.sync_api import sync_playwright
from turnlens.queries import catalog

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "support"))
sys.path.insert(0, str(REPO / "bench"))
import demo_soak  # noqa: E402 - bench/demo_soak.py: its page load, its process accounting and its browser
from dashboard_server import running_dashboard  # noqa: E402 - tests/support: the dashboard as the tests run it

WARM_LOADS = 2


def a_turn_with_a_finding(store: Path) -> dict[str, str]:
    """The first turn (by id) with the store's most common finding: a Turn detail page that shows one."""
    with catalog.connect(store) as con:
        row = con.execute(
            "select session_id, turn_id from divergences"
            " where kind = (select kind from divergences group by kind order by count(*) desc, kind limit 1)"
            " order by turn_id limit 1"
        ).fetchone()
    if row is None:
        raise SystemExit(f"{store} has no finding to show on Turn detail")
    return {"session": row[0], "turn": row[1]}


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds so far of the dashboard's server (Streamlit serving turnlens.dashboard.commands, and its
    children) and of the browser (every other process this one started)."""
    processes = demo_soak._processes()
    mine = demo_soak._subtree(processes, os.getpid())
    roots = [pid for pid in mine if "turnlens.dashboard.commands" in processes[pid][2]]
    server = set().union(*(demo_soak._subtree(processes, pid) for pid in roots))
    browser = mine - server - {os.getpid()}
    return sum(processes[pid][1] for pid in server), sum(processes[pid][1] for pid in browser)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", type=Path, required=True, help="the store the dashboard reads")
    parser.add_argument(
        "--page", choices=sorted(demo_soak.PAGES), default="turn_detail", help="the page to load"
    )
    parser.add_argument("--loads", type=int, default=12, help="loads measured (after two left out)")
    parser.add_argument("--json", action="store_true", help="stdout holds only the figures (one JSON object)")
    args = parser.parse_args()
    if not demo_soak.CHROMIUM.exists():
        print("Debian's chromium is not installed: `make browser` installs it", file=sys.stderr)
        return 2
    turn = a_turn_with_a_finding(args.store) if args.page == "turn_detail" else {}
    path = demo_soak.PAGES[args.page].format(**{key: quote(value) for key, value in turn.items()})
    walls, server_cpu, browser_cpu = [], [], []
    log = args.store / "page_cost.log"
    with running_dashboard(args.store, log) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(demo_soak.CHROMIUM), args=demo_soak.CHROMIUM_ARGS
        )
        page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
        for load in range(WARM_LOADS + args.loads):
            server_before, browser_before = cpu_seconds()
            seconds, outcome = demo_soak._load(page, f"{url}/{path}")
            server_after, browser_after = cpu_seconds()
            if outcome != "ok":
                raise SystemExit(f"{args.page}: the page showed {outcome} (the dashboard's log: {log})")
            if load >= WARM_LOADS:
                walls.append(seconds)
                server_cpu.append(server_after - server_before)
                browser_cpu.append(browser_after - browser_before)
        browser.close()
    figures: dict[str, Any] = {
        "page": args.page,
        "loads": len(walls),
        "wall_p50_s": round(statistics.median(walls), 3),
        "wall_max_s": round(max(walls), 3),
        "server_cpu_p50_s": round(statistics.median(server_cpu), 3),
        "browser_cpu_p50_s": round(statistics.median(browser_cpu), 3),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"{args.page}: {figures['loads']} loads, wall p50 {figures['wall_p50_s']:.2f} s"
            f" (max {figures['wall_max_s']:.2f}), CPU p50 server {figures['server_cpu_p50_s']:.2f} s,"
            f" browser {figures['browser_cpu_p50_s']:.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
