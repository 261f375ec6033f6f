"""How long after its spans are acknowledged a finding shows in `divergences`, under sustained load.

A real `turnlens collect` process with its default settings receives, over OTLP/HTTP on 127.0.0.1:

- background traffic at `--rate` spans/s (default 20,000): the simulator's requests encoded once as OTLP
  protobuf and copied with new ids and start times moved to the moment of sending (sample_data/bulk.py's byte
  patching, plus the fixed64 times), posted by `--senders` processes;
- every `--probe-every` seconds a probe: one simulated session whose turns each carry a known finding
  (`ghost_commit`), exported by the OpenTelemetry SDK's OTLPSpanExporter. The moment `export()` returns
  SUCCESS is the acknowledgement.

A watcher reads the store's catalogue as the dashboard does (a new read-only connection each poll) and records
when each probe's finding turns are all in `divergences`. Prints `freshness_p50_s`, `freshness_p99_s`, the
achieved rate and the load average, as one JSON object (`--json`: stdout holds only that).

    .venv/bin/python bench/freshness.py --seconds 60 --json
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnlens.queries import catalog
from turnlens.sample_data import bulk, simulate

REPO = Path(__file__).resolve().parent.parent
SCENARIO = "ghost_commit"
_FIXED64_TIME_TAGS = (b"\x39", b"\x41", b"\x09")  # span start / end, event time: fixed64 fields


@dataclass(frozen=True)
class TimedTemplate:
    """A fast-mode template plus where its fixed64 times sit, so a copy can be moved to now."""

    template: bulk.Template
    time_offsets: tuple[int, ...]
    first_ns: int


def timed_templates(start_ns: int) -> list[TimedTemplate]:
    """The fast mode's templates of a short, dense simulation started at `start_ns`, with their time offsets:
    an
    8-byte value after a fixed64 tag that falls inside the simulated period is a time."""
    original = bulk.Simulation
    bulk.Simulation = lambda **kw: original(**kw, start_ns=start_ns, sessions_per_minute=600.0)  # type: ignore
    try:
        templates = bulk.build_templates(sessions=40, seed=21)
    finally:
        bulk.Simulation = original  # type: ignore[misc]
    lo, hi = start_ns - 60 * 10**9, start_ns + 3600 * 10**9
    timed = []
    for template in templates:
        data, offsets = template.data, []
        for tag in _FIXED64_TIME_TAGS:
            at = data.find(tag)
            while at != -1:
                if at + 9 <= len(data) and lo <= struct.unpack_from("<Q", data, at + 1)[0] <= hi:
                    offsets.append(at + 1)
                at = data.find(tag, at + 1)
        times = [struct.unpack_from("<Q", data, at)[0] for at in offsets]
        timed.append(TimedTemplate(template, tuple(sorted(set(offsets))), min(times) if times else start_ns))
    return timed


def send_background(url: str, rate: float, seconds: float, sender: int, acked: Any) -> None:
    """Posts copies of the templates at `rate` spans/s for `seconds`, each copy's ids new and its times moved
    so that its first span starts now."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    templates = timed_templates(time.time_ns())
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    started = time.monotonic()
    sent = 0
    copy = 1_000_000 * (sender + 1)  # copy numbers no other sender (nor the probes) uses
    while time.monotonic() - started < seconds:
        copy += 1
        for timed in templates:
            behind = sent / rate - (time.monotonic() - started)
            if behind > 0:
                time.sleep(behind)
            buf = bytearray(timed.template.data)
            for offset in timed.template.binary_id_offsets:
                buf[offset : offset + 4] = copy.to_bytes(4, "big")
            for offset in timed.template.text_id_offsets:
                buf[offset : offset + 8] = f"{copy:08x}".encode()
            shift = time.time_ns() - timed.first_ns
            for offset in timed.time_offsets:
                struct.pack_into("<Q", buf, offset, struct.unpack_from("<Q", buf, offset)[0] + shift)
            connection.request("POST", "/v1/traces", bytes(buf), {"Content-Type": "application/x-protobuf"})
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                with acked.get_lock():
                    acked.value += timed.template.spans
            sent += timed.template.spans


@dataclass
class Probe:
    sent_at: float
    acked_at: float
    turns: set[str]
    visible_at: float | None = None


def send_probe(url: str, seed: int) -> Probe:
    """One simulated session of finding turns, exported by the OpenTelemetry SDK's OTLP/HTTP exporter."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    sim = simulate.Simulation(
        sessions=1, seed=seed, chaos=False, mix={SCENARIO: 1.0}, start_ns=time.time_ns() - 60 * 10**9
    )
    spans = [span for batch in sim.batches() for span in batch]
    turns = {turn["turn_id"] for turn in sim.labels()["turns"] if SCENARIO in turn["kinds"]}
    exporter = OTLPSpanExporter(endpoint=url, timeout=30)
    sent = time.time()
    result = exporter.export(spans)
    acked = time.time()
    exporter.shutdown()
    if result != SpanExportResult.SUCCESS:
        raise RuntimeError(f"the collector did not acknowledge probe {seed}")
    return Probe(sent, acked, turns)


def watch(store: Path, probes: list[Probe], lock: threading.Lock, stop: threading.Event) -> None:
    """Polls `divergences` through the store's catalogue, as a reader would, for the probes' turns."""
    while not stop.is_set():
        with lock:
            pending = [probe for probe in probes if probe.visible_at is None]
        turns = sorted({turn for probe in pending for turn in probe.turns})
        if turns:
            try:
                with catalog.connect(store) as con:
                    found = {
                        turn
                        for (turn,) in con.execute(
                            "select distinct turn_id from divergences where kind = $kind"
                            " and list_contains($turns, turn_id)",
                            {"kind": SCENARIO, "turns": turns},
                        ).fetchall()
                    }
            except Exception as exc:  # noqa: BLE001 - a reader's failure is a figure too
                print(f"reader failed: {exc}", file=sys.stderr)
                found = set()
            now = time.time()
            with lock:
                for probe in pending:
                    if probe.turns <= found:
                        probe.visible_at = now
        stop.wait(0.25)


def start_collector(store: Path, port: int) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "turnlens.cli",
        "collect",
        "--store",
        str(store),
        "--http",
        f"127.0.0.1:{port}",
        "--grpc",
        "off",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "listening" in line:
            break
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    return proc


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the background traffic runs")
    parser.add_argument("--rate", type=float, default=20_000.0, help="background spans per second, in all")
    parser.add_argument("--senders", type=int, default=2, help="background sender processes")
    parser.add_argument("--probe-every", type=float, default=2.0, help="seconds between probes")
    parser.add_argument(
        "--warmup", type=float, default=20.0, help="seconds of background traffic before the first probe"
    )
    parser.add_argument("--store", type=Path, default=None, help="store folder (default: a temporary one)")
    parser.add_argument(
        "--json", action="store_true", help="stdout holds only the figures, as one JSON object"
    )
    args = parser.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print

    store = args.store or Path(tempfile.mkdtemp(prefix="turnlens-freshness-"))
    store.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "sample_data" / "tool_registry.toml", store / "tool_registry.toml")
    port = free_port()
    collector = start_collector(store, port)
    url = f"http://127.0.0.1:{port}/v1/traces"
    acked = multiprocessing.Value("q", 0)
    senders = [
        multiprocessing.Process(
            target=send_background, args=(url, args.rate / args.senders, args.seconds, i, acked)
        )
        for i in range(args.senders)
    ]
    probes: list[Probe] = []
    lock, stop = threading.Lock(), threading.Event()
    watcher = threading.Thread(target=watch, args=(store, probes, lock, stop), daemon=True)
    load_before = os.getloadavg()[0]
    try:
        for sender in senders:
            sender.start()
        watcher.start()
        time.sleep(args.warmup)  # the first full build of the empty store, then steady refreshes
        started = time.monotonic()
        seed = 0
        while time.monotonic() - started < args.seconds:
            seed += 1
            probe = send_probe(url, seed)
            with lock:
                probes.append(probe)
            time.sleep(max(0.0, args.probe_every - (time.time() - probe.sent_at)))
        sent_for = time.monotonic() - started + args.warmup
        spans_acked = acked.value
        load_during = os.getloadavg()[0]
        for sender in senders:
            sender.join(30)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with lock:
                if all(probe.visible_at is not None for probe in probes):
                    break
            time.sleep(0.5)
    finally:
        stop.set()
        for sender in senders:
            if sender.is_alive():
                sender.terminate()
        collector.send_signal(signal.SIGTERM)
        collector.wait(60)
    seen = sorted(probe.visible_at - probe.acked_at for probe in probes if probe.visible_at is not None)
    results: dict[str, Any] = {
        "probes": len(probes),
        "probes_visible": len(seen),
        "freshness_p50_s": round(statistics.median(seen), 2) if seen else None,
        "freshness_p99_s": round(seen[min(len(seen) - 1, int(len(seen) * 0.99))], 2) if seen else None,
        "freshness_max_s": round(seen[-1], 2) if seen else None,
        "background_spans_per_s": round(spans_acked / sent_for, 0),
        "seconds": round(sent_for, 1),
        "load_average_1m_before": round(load_before, 2),
        "load_average_1m_during": round(load_during, 2),
        "cores": os.cpu_count(),
    }
    say(f"store {store}")
    print(json.dumps(results))
    if args.store is None:
        shutil.rmtree(store, ignore_errors=True)
    return 0 if len(seen) == len(probes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
