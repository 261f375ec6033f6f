"""`turnlens demo`: the recorded sample, a collector, live simulated traffic and the dashboard, at once."""

from __future__ import annotations

import argparse
import importlib.resources
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

# shipped as package data of turnlens.sample_data, so found wherever turnlens is installed (a folder on disk)
SAMPLE = Path(str(importlib.resources.files("turnlens.sample_data") / "sample.jsonl.gz"))
# The live traffic adds to the recorded sample (120 sessions, 4 a minute) without drowning it: one new session
# every 10 s is a story a viewer can follow, and after 30 minutes the store is about two samples' worth.
LIVE_RATE = 0.1
# The collector's maintenance, tuned so a store fed at that rate keeps few segment files: merged every 30 s,
# the replaced ones gone a minute later (readers through turnlens hold leases and need no grace at all).
COMPACT_INTERVAL = "30s"
GRACE = "1m"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="start a collector, live simulated traffic and the dashboard on one store"
    )
    parser.add_argument("--store", type=Path, default=Path("turnlens-data"), help="store directory")
    parser.add_argument("--http", default="127.0.0.1:4318", help="collector OTLP/HTTP address")
    parser.add_argument("--grpc", default="127.0.0.1:4317", help="collector OTLP/gRPC address")
    parser.add_argument("--port", type=int, default=8501, help="dashboard port")
    parser.add_argument(
        "--rate", type=float, default=LIVE_RATE, help="live sessions per second (default %(default)s)"
    )
    parser.add_argument("--no-live", action="store_true", help="only the recorded sample, no live traffic")
    parser.add_argument(
        "--sample-as-recorded",
        action="store_true",
        help="load the sample at its recorded dates (default: moved to end a few minutes before now)",
    )
    parser.set_defaults(func=run)


def _turnlens(*args: str) -> list[str]:
    return [sys.executable, "-m", "turnlens.cli", *args]


def _wait_for_http(url: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return True
        except OSError as exc:
            if getattr(exc, "code", None):  # any HTTP answer means the server is up
                return True
            time.sleep(0.2)
    return False


def load_sample(store: Path, *, as_recorded: bool = False) -> None:
    """Ingests the recorded sample, by default moved to end a few minutes ago so its incident is on screen
    next to the live traffic (`--sample-as-recorded` keeps its recorded dates)."""
    from turnlens.sample_data import shift

    store.mkdir(parents=True, exist_ok=True)
    if as_recorded:
        print(f"turnlens demo: loading the recorded sample into {store}", flush=True)
        subprocess.run(_turnlens("ingest", "--store", str(store), str(SAMPLE)), check=True)
        return
    moved = store / ".sample-now.jsonl.gz"
    delta_ms = shift.write_shifted(SAMPLE, moved)
    print(
        f"turnlens demo: loading the recorded sample into {store}, moved {delta_ms / 86_400_000:.1f} days "
        "later so it ends a few minutes ago",
        flush=True,
    )
    try:
        subprocess.run(_turnlens("ingest", "--store", str(store), str(moved)), check=True)
    finally:
        moved.unlink(missing_ok=True)


def copy_registry(store: Path) -> None:
    """Gives the store the simulated fleet's tool tiers, unless it has a registry of its own: without them the
    framework apps' tools are untiered, and none of their calls can commit or be cut short."""
    registry = SAMPLE.parent / "tool_registry.toml"
    if registry.exists() and not (store / "tool_registry.toml").exists():
        store.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(registry, store / "tool_registry.toml")


def run(args: argparse.Namespace) -> int:
    store: Path = args.store
    fresh = not (store / "segments").exists()
    copy_registry(store)
    if fresh and SAMPLE.exists():
        load_sample(store, as_recorded=args.sample_as_recorded)

    children: list[subprocess.Popen[bytes]] = []

    def stop(*_: object) -> None:
        for child in reversed(children):
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        children.append(
            subprocess.Popen(
                _turnlens(
                    "collect", "--store", str(store), "--http", args.http, "--grpc", args.grpc,
                    "--compact-interval", COMPACT_INTERVAL, "--grace", GRACE,
                )
            )
        )
        if not _wait_for_http(f"http://{args.http}/v1/traces", 30):
            print("turnlens demo: the collector did not start", file=sys.stderr)
            return 1
        if not args.no_live:
            children.append(
                subprocess.Popen(
                    _turnlens(
                        "simulate",
                        "--endpoint",
                        f"http://{args.http}",
                        "--rate",
                        str(args.rate),
                        "--sessions",
                        "0",  # endless, at --rate
                    )
                )
            )
        dashboard = subprocess.Popen(_turnlens("dashboard", "--store", str(store), "--port", str(args.port)))
        children.append(dashboard)
        print(
            f"turnlens demo: dashboard on http://127.0.0.1:{args.port}  (Ctrl-C stops everything)", flush=True
        )
        return dashboard.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        stop()
