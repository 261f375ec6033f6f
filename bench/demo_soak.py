"""Runs `turnlens demo` (the recorded sample plus live traffic) on a fresh store and loads every dashboard
page in headless Chromium in a loop: how long each page takes to show (data and render), whether the segment
files stay bounded, and whether anything failed in the demo's log or on a page. The target: every page under
2 s at the 95th percentile, no materialise failure, a bounded number of segment files.

    .venv/bin/python bench/demo_soak.py --minutes 30                  # prints a JSON summary at the end
    .venv/bin/python bench/demo_soak.py --minutes 5 --out soak.json

A page's time runs from the navigation until its title is shown and Streamlit has finished the script run (it
says so on the app's root; no status widget, no skeleton) twice in a row, 50 ms apart: a full page load, as a
user opening a link sees it, Streamlit's own start-up in the browser included. Beside each load's wall time it
records the CPU seconds (user + sys) the load cost the dashboard's server and the browser, and the 1-minute
load average: on a machine other work shares, the wall time says how long a user waited, the CPU seconds what
the page itself costs. The demo's own background work (collector, compaction, materialiser, simulated traffic)
is reported as the cores it kept busy on average.
`--json`: stdout holds only the JSON summary (the progress goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
PAGES = {  # name -> url path and query ({session}/{turn}: the store's latest turn)
    "overview": "",
    "turns": "turns",
    "turn_detail": "turn?session={session}&turn={turn}",
    "side_effects": "side_effects",
    "tools": "tools",
    "alerts": "alerts",
    "sql_console": "sql?sql=select+kind%2C+count(*)+from+divergences+group+by+all",
}
TARGET_S = 2.0
PAGE_TIMEOUT_S = 120.0
LOG_PROBLEMS = ("Traceback", "exited", "IO Error", "Error:", "failed")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(url: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.read() == b"ok":
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def _latest_turn(store: Path) -> dict[str, str] | None:
    """The newest turn of the store, for the Turn detail page (None until the store answers)."""
    from turnlens.queries import catalog

    sql = (REPO / "dashboard" / "sql" / "recent_turns.sql").read_text()  # the Turn detail page's own picker
    try:
        with catalog.reading(store) as con:
            turns = catalog.execute_script(con, sql, {"limit": 1}).fetchall()
    except Exception:  # noqa: BLE001 - the store may not have its catalogue yet
        return None
    return {"session": str(turns[0][0]), "turn": str(turns[0][1])} if turns else None


def _store_files(store: Path) -> dict[str, int]:
    segments = [p for p in (store / "segments").glob("*/*.parquet") if p.name != "empty.parquet"]
    derived = store / "derived"
    return {
        "segment_files": len(segments),
        "snapshot_generations": len(list(derived.glob("gen-*"))),
        "unfinished_snapshots": len(list(derived.glob(".gen-*.tmp"))),
    }


TICKS = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[int, float, str]]:
    """Every process: pid -> (parent pid, CPU seconds of it and its reaped children, command line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (name) ": state is fields[0]
        ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        found[int(entry.name)] = (int(fields[1]), ticks / TICKS, command)
    return found


def _subtree(processes: dict[int, tuple[int, float, str]], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in processes and pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, []))
    return tree


def _cpu(demo_pid: int) -> dict[str, float]:
    """CPU seconds so far of the dashboard's server, the browser (every process this bench started but the
    demo), and the rest of the demo (collector, its maintenance children, the simulated traffic)."""
    processes = _processes()
    demo = _subtree(processes, demo_pid)
    server_roots = [pid for pid in demo if "turnlens.dashboard.commands" in processes[pid][2]]
    server = set().union(*(_subtree(processes, pid) for pid in server_roots))
    browser = _subtree(processes, os.getpid()) - demo - {os.getpid()}

    def seconds(pids: set[int]) -> float:
        return sum(processes[pid][1] for pid in pids)

    return {"server": seconds(server), "browser": seconds(browser), "background": seconds(demo - server)}


# Streamlit's own state of the script run (the app root's attribute): a page's title shows while its run goes
# on, and the status widget only after a delay, so a load is done once the run is reported over.
RUNNING = '[data-testid="stApp"]:not([data-test-script-state="notRunning"])'


def _load(page: Any, url: str) -> tuple[float, str]:
    """Seconds until the page is shown and idle, and what it showed: ok, failure (a sentence), exception."""
    started = time.perf_counter()
    page.goto(url, wait_until="commit", timeout=PAGE_TIMEOUT_S * 1000)
    page.locator('[data-testid="stMain"] h1').first.wait_for(timeout=PAGE_TIMEOUT_S * 1000)
    idle = 0
    while idle < 2:
        busy = page.locator(f'[data-testid="stStatusWidget"], [data-testid="stSkeleton"], {RUNNING}').count()
        idle = 0 if busy else idle + 1
        if time.perf_counter() - started > PAGE_TIMEOUT_S:
            return time.perf_counter() - started, "timeout"
        time.sleep(0.05)
    seconds = time.perf_counter() - started - 0.05  # the second idle check only confirmed the first
    if page.locator('[data-testid="stException"]').count() or page.get_by_text("Traceback").count():
        return seconds, "exception"
    if page.get_by_text("could not be shown").count():
        return seconds, "failure"
    return seconds, "ok"


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def _summary(samples: list[dict[str, Any]], files: list[dict[str, Any]], warmup_s: float) -> dict[str, Any]:
    pages: dict[str, Any] = {}
    for name in PAGES:
        for label, rows in (
            ("all", [s for s in samples if s["page"] == name]),
            ("after_warmup", [s for s in samples if s["page"] == name and s["at_s"] >= warmup_s]),
        ):
            times = sorted(s["seconds"] for s in rows)
            if not times:
                continue
            pages.setdefault(name, {})[label] = {
                "loads": len(times),
                "p50_s": round(statistics.median(times), 3),
                "p95_s": round(_p95(times), 3),
                "max_s": round(times[-1], 3),
                "server_cpu_p50_s": round(statistics.median(s["server_cpu_s"] for s in rows), 3),
                "browser_cpu_p50_s": round(statistics.median(s["browser_cpu_s"] for s in rows), 3),
                "load_average_1m_mean": round(statistics.mean(s["load_average_1m"] for s in rows), 1),
                "over_target": sum(t > TARGET_S for t in times),
                "outcomes": {o: sum(s["outcome"] == o for s in rows) for o in {s["outcome"] for s in rows}},
            }
    loads = [s["load_average_1m"] for s in samples] or [os.getloadavg()[0]]
    return {
        "pages": pages,
        "load_average_1m": {
            "min": round(min(loads), 1),
            "mean": round(statistics.mean(loads), 1),
            "max": round(max(loads), 1),
        },
        "segment_files_max": max((f["segment_files"] for f in files), default=0),
        "segment_files_last": files[-1]["segment_files"] if files else 0,
        "files_over_time": files[:: max(1, len(files) // 30)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="how long to drive the pages")
    parser.add_argument("--warmup", type=float, default=2.0, help="minutes left out of after_warmup")
    parser.add_argument("--store", type=Path, default=None, help="store folder (default: a fresh one)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON summary here")
    parser.add_argument(
        "--json", action="store_true", help="stdout holds only the JSON summary (progress on stderr)"
    )
    args = parser.parse_args()
    if not CHROMIUM.exists():
        print("Debian's chromium is not installed: `make browser` installs it", file=sys.stderr)
        return 2

    store = args.store or Path(tempfile.mkdtemp(prefix="turnlens-soak-")) / "store"
    work = store.parent
    http, grpc, port = _free_port(), _free_port(), _free_port()
    log_path = work / "demo.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed at the end
    turnlens = Path(sys.executable).with_name("turnlens")
    demo = subprocess.Popen(
        [str(turnlens), "demo", "--store", str(store), "--http", f"127.0.0.1:{http}",
         "--grpc", f"127.0.0.1:{grpc}", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    samples: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    progress = sys.stderr if args.json else sys.stdout
    started = time.monotonic()
    background_before = _cpu(demo.pid)["background"]
    try:
        if not _wait_for(f"{url}/_stcore/health", 300):
            print(f"the demo's dashboard did not come up; see {log_path}", file=sys.stderr)
            return 1
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            page = context.new_page()
            end = started + args.minutes * 60
            while time.monotonic() < end:
                turn = _latest_turn(store)
                files.append({"at_s": round(time.monotonic() - started), **_store_files(store)})
                for name, path in PAGES.items():
                    if "{session}" in path and turn is None:
                        continue
                    at_s = time.monotonic() - started
                    cpu_before = _cpu(demo.pid)
                    try:
                        seconds, outcome = _load(page, f"{url}/{path.format(**(turn or {}))}")
                    except Exception as exc:  # noqa: BLE001 - a page that never showed is a result too
                        seconds, outcome = time.monotonic() - started - at_s, f"error {type(exc).__name__}"
                    cpu_after = _cpu(demo.pid)
                    sample = {
                        "page": name,
                        "at_s": round(at_s, 1),
                        "seconds": seconds,
                        "outcome": outcome,
                        "server_cpu_s": round(cpu_after["server"] - cpu_before["server"], 3),
                        "browser_cpu_s": round(cpu_after["browser"] - cpu_before["browser"], 3),
                        "load_average_1m": os.getloadavg()[0],
                    }
                    samples.append(sample)
                    print(
                        f"{at_s:7.0f} s  {name:13} {seconds:6.2f} s  server {sample['server_cpu_s']:5.2f} "
                        f"CPU s  browser {sample['browser_cpu_s']:5.2f} CPU s  load "
                        f"{sample['load_average_1m']:4.1f}  {outcome}",
                        file=progress,
                        flush=True,
                    )
            browser.close()
        background_cpu_s = _cpu(demo.pid)["background"] - background_before
    finally:
        os.killpg(demo.pid, signal.SIGTERM)  # the demo's own session: its collector, simulator, dashboard
        try:
            demo.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
        log.close()
    problems = [
        line.strip() for line in log_path.read_text(errors="replace").splitlines()
        if any(word in line for word in LOG_PROBLEMS)
    ]
    summary = {
        "minutes": args.minutes,
        "store": str(store),
        "log": str(log_path),
        **_summary(samples, files, args.warmup * 60),
        "demo_background_cores": round(background_cpu_s / max(1.0, time.monotonic() - started), 2),
        "final_files": _store_files(store),
        "log_problems": len(problems),
        "log_problem_lines": problems[:20],
    }
    text = json.dumps(summary, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
