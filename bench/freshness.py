"""How long after its spans are acknowledged a finding shows in `divergences`, under sustained load.

A real `turnlens collect` process with its default settings receives, over OTLP/HTTP on 127.0.0.1:

- background traffic at `--rate` spans/s (default 20,000): the simulator's requests encoded once as OTLP
  protobuf and copied with new ids and start times moved to the moment of sending (sample_data/bulk.py's byte
  patching, plus the fixed64 times), posted by `--senders` processes;
- every `--probe-every` seconds a probe: one simulated session whose turns each carry a known finding
  (`ghost_commit`), exported by the OpenTelemetry SDK's OTLPSpanExporter. The moment `export()` returns
  SUCCESS is the acknowledgement.

A watcher reads the store's catalogue as the dashboard does (a new read-only connection each time the
materialiser publishes, `watch`) and records when each probe's finding turns are all in `divergences`.
Prints `freshness_p50_s`, `freshness_p99_s`, the achieved rate, the load average and what the materialiser's
own summaries say of its runs (`loop_busy_share`, `run_wall_us_per_copy`, ...: loop_runs), as one JSON object
(`--json`: stdout holds only that).

    .venv/bin/python bench/freshness.py --seconds 60 --json

A window shorter than the collector's compaction interval (5 minutes) holds no compaction pass, and one of a
minute or two no fold of full partitions: `--seconds 900` gives the sustained figure.
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
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnlens.queries import catalog
from turnlens.sample_data import bulk, simulate

REPO = Path(__file__).resolve().parent.parent
SCENARIO = "ghost_commit"
POLL_S = 0.1  # how often the watcher looks for a new publish
RECHECK_S = 5.0  # and reads divergences at least this often whatever it found
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


class Patcher:
    """Makes copies of one template fast: the template's bytes cut at every id and time, so that a copy is one
    join of the fixed pieces with the copy's ids and moved times (no per-byte work in Python)."""

    def __init__(self, timed: TimedTemplate) -> None:
        template = timed.template
        data = template.data
        cuts = sorted(
            [(at, 4, "b") for at in template.binary_id_offsets]
            + [(at, 8, "t") for at in template.text_id_offsets]
            + [(at, 8, "q") for at in timed.time_offsets]
        )
        self.pieces: list[bytes] = []
        self.kinds: list[str] = []
        at = 0
        kept = []
        for offset, width, kind in cuts:
            if offset < at:  # a "time" inside an id's bytes: not a time
                assert kind == "q", f"ids overlap at {offset}"
                continue
            kept.append((offset, width, kind))
            self.pieces.append(data[at:offset])
            self.kinds.append(kind)
            at = offset + width
        self.tail = data[at:]
        self.times = [struct.unpack_from("<Q", data, at)[0] for at, _, kind in kept if kind == "q"]
        self.spans = template.spans
        self.first_ns = timed.first_ns

    def copy(self, number: int, now_ns: int) -> bytes:
        binary, text = number.to_bytes(4, "big"), f"{number:08x}".encode()
        shift = now_ns - self.first_ns
        moved = struct.pack(f"<{len(self.times)}Q", *[t + shift for t in self.times])
        times = iter(moved[i : i + 8] for i in range(0, len(moved), 8))
        out: list[bytes] = []
        for piece, kind in zip(self.pieces, self.kinds, strict=True):
            out.append(piece)
            out.append(binary if kind == "b" else text if kind == "t" else next(times))
        out.append(self.tail)
        return b"".join(out)


def send_background(url: str, rate: float, seconds: float, sender: int, acked: Any, cpu: Any) -> None:
    """Posts copies of the templates at `rate` spans/s for `seconds`, each copy's ids new and its times moved
    so that its first span starts now. Adds the spans acknowledged to `acked`, its CPU seconds to `cpu`."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    patchers = [Patcher(timed) for timed in timed_templates(time.time_ns())]
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    started = time.monotonic()
    cpu_started = time.process_time()
    sent = 0
    copy = 1_000_000 * (sender + 1)  # copy numbers no other sender (nor the probes) uses
    while time.monotonic() - started < seconds:
        copy += 1
        for patcher in patchers:
            behind = sent / rate - (time.monotonic() - started)
            if behind > 0:
                time.sleep(behind)
            body = patcher.copy(copy, time.time_ns())
            connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                with acked.get_lock():
                    acked.value += patcher.spans
            sent += patcher.spans
            if time.monotonic() - started >= seconds:
                break
    with cpu.get_lock():
        cpu.value += time.process_time() - cpu_started


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


def published(store: Path) -> tuple[tuple[int, int], ...]:
    """What changes when the materialiser publishes: the catalogue file (replaced by a rename) and the
    manifest, by inode and modification time; a stat of each, not a query."""
    stamps = []
    for path in (store / catalog.CATALOG_FILE, store / "derived" / "current.json"):
        try:
            stat = path.stat()
        except OSError:
            stamps.append((0, 0))
        else:
            stamps.append((stat.st_ino, stat.st_mtime_ns))
    return tuple(stamps)


def watch(store: Path, probes: list[Probe], lock: threading.Lock, stop: threading.Event) -> None:
    """Reads `divergences` through the store's catalogue, as a reader would, for the probes' turns: each time
    the materialiser has published (the catalogue or the manifest changed), at least every RECHECK_S, and
    whenever a new probe is waiting. `divergences` reads the derived state only, which changes only when it
    is published, so a stat every POLL_S finds the same moment a query every POLL_S would; a query costs
    ~0.12 CPU s, which three times a second took a seventh of the two cores from what it measures."""
    seen: tuple[tuple[int, int], ...] = ()
    asked: frozenset[str] = frozenset()
    last = 0.0
    while not stop.is_set():
        with lock:
            pending = [probe for probe in probes if probe.visible_at is None]
        turns = sorted({turn for probe in pending for turn in probe.turns})
        stamps = published(store)
        due = stamps != seen or not asked.issuperset(turns) or time.monotonic() - last > RECHECK_S
        if turns and due:
            seen, asked, last = stamps, frozenset(turns), time.monotonic()
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
                found, seen = set(), ()
            now = time.time()
            with lock:
                for probe in pending:
                    if probe.turns <= found:
                        probe.visible_at = now
        stop.wait(POLL_S)


def start_collector(store: Path, port: int, log: Path) -> subprocess.Popen[str]:
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
        "--materialize-log",  # each refresh's summary, for loop_runs: the defaults otherwise
        str(log),
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
    log = store.with_name(f"{store.name}.materialize.jsonl")  # beside the store, not in it
    log.unlink(missing_ok=True)
    collector = start_collector(store, port, log)
    collector_started = time.time()
    url = f"http://127.0.0.1:{port}/v1/traces"
    acked = multiprocessing.Value("q", 0)
    sender_cpu = multiprocessing.Value("d", 0.0)
    senders = [  # the traffic runs through the warm-up and the whole probing window
        multiprocessing.Process(
            target=send_background,
            args=(url, args.rate / args.senders, args.warmup + args.seconds, i, acked, sender_cpu),
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
        time.sleep(args.warmup)  # the materialiser's first run, then steady refreshes
        started, window_started = time.monotonic(), time.time()
        acked_before, cpu_before = acked.value, process_cpu(collector.pid)
        cpu_before["bench (probes, watcher)"] = time.process_time()
        seed = 0
        while time.monotonic() - started < args.seconds:
            seed += 1
            probe = send_probe(url, seed)
            with lock:
                probes.append(probe)
            time.sleep(max(0.0, args.probe_every - (time.time() - probe.sent_at)))
        window = time.monotonic() - started
        window_ended = time.time()
        spans_in_window = acked.value - acked_before
        cpu_after = process_cpu(collector.pid)
        cpu_after["bench (probes, watcher)"] = time.process_time()
        load_during = os.getloadavg()[0]
        for sender in senders:
            sender.join(30)
        spans_acked = acked.value
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
        "rate_requested_spans_per_s": args.rate,
        # acknowledged background spans per second while the probes were sent, and over the whole traffic
        "background_spans_per_s": round(spans_in_window / window, 0),
        "background_spans_per_s_all": round(spans_acked / (args.warmup + window), 0),
        "background_spans": spans_acked,
        "seconds": round(window, 1),
        "warmup_s": args.warmup,
        # CPU seconds (user + system) during the probing window, per second of it
        "cpu_per_s": {
            name: round((cpu_after.get(name, 0.0) - cpu_before.get(name, 0.0)) / window, 2)
            for name in sorted(set(cpu_after) | set(cpu_before))
        },
        "sender_cpu_s": round(sender_cpu.value, 1),
        **refreshes(store, collector_started, window_started, window_ended),
        **loop_runs(log, window_started, window_ended),
        "load_average_1m": round(load_during, 2),
        "load_average_1m_before": round(load_before, 2),
        "cores": os.cpu_count(),
    }
    say(f"store {store}")
    print(json.dumps(results))
    if args.store is None:
        shutil.rmtree(store, ignore_errors=True)
        log.unlink(missing_ok=True)
    return 0 if len(seen) == len(probes) else 1


def process_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of the collector and of its maintenance children, by role."""
    import psutil

    totals: dict[str, float] = defaultdict(float)
    try:
        parent = psutil.Process(pid)
        processes = [("collector", parent)] + [
            ("materializer" if "materialize" in child.cmdline() else "compaction", child)
            for child in parent.children(recursive=True)
        ]
        for role, process in processes:
            times = process.cpu_times()
            totals[role] += times.user + times.system
    except psutil.Error:
        pass
    return dict(totals)


def refreshes(
    store: Path, collector_started: float, window_started: float, window_ended: float
) -> dict[str, Any]:
    """What the published versions of the derived state say: when the first one came (after the collector
    started), how often one was published while probes were sent, and how far behind its publication its
    watermark was (the margin plus the run's own time)."""
    published = []
    for path in (store / "derived" / "manifests").glob("v*.json"):
        try:
            body = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        built, mark = float(body["built_unix"]), int(body["watermark"]) / 1e9
        published.append((built, mark, body.get("partitions_total")))
    published.sort()
    whole = [(built, mark) for built, mark, total in published if total is None]
    in_window = [(built, mark) for built, mark in whole if window_started <= built <= window_ended]
    gaps = [b - a for (a, _), (b, _) in zip(in_window, in_window[1:], strict=False)]
    behind = [built - mark for built, mark in in_window]
    return {
        "first_publish_s": round(whole[0][0] - collector_started, 1) if whole else None,
        "refreshes_in_window": len(in_window),
        "refresh_gap_p50_s": round(statistics.median(gaps), 2) if gaps else None,
        "refresh_gap_max_s": round(max(gaps), 2) if gaps else None,
        "watermark_behind_p50_s": round(statistics.median(behind), 2) if behind else None,
        "watermark_behind_max_s": round(max(behind), 2) if behind else None,
    }


def loop_runs(log: Path, window_started: float, window_ended: float) -> dict[str, Any]:
    """What the materialiser's own summaries (`--materialize-log`) say of its refreshes that started in the
    window: the share of the window they ran (near 1, the loop runs back to back and any extra work is a
    backlog), their wall and CPU time per copy taken (steadier from one run of this benchmark to the next than
    the p99), and a least-squares fit of a run's wall time as a fixed part plus a cost per copy."""
    runs = []
    for line in log.read_text().splitlines() if log.exists() else []:
        try:
            run = json.loads(line)
        except ValueError:
            continue
        started = int(run.get("watermark_unix_nano") or 0) / 1e9  # a refresh's watermark is its start
        in_window = window_started <= started <= window_ended
        if run.get("mode") == "refresh" and in_window and run.get("new_copies"):
            runs.append(run)
    if len(runs) < 2:
        return {"loop_runs": len(runs)}
    copies = [float(run["new_copies"]) for run in runs]
    walls = [float(run["seconds"]) for run in runs]
    per_copy, fixed = statistics.linear_regression(copies, walls)
    return {
        "loop_runs": len(runs),
        "loop_busy_share": round(sum(walls) / (window_ended - window_started), 3),
        "run_wall_us_per_copy": round(sum(walls) / sum(copies) * 1e6, 1),
        "run_cpu_us_per_copy": round(sum(float(run["cpu_seconds"]) for run in runs) / sum(copies) * 1e6, 1),
        "run_fixed_s": round(fixed, 3),
        "run_marginal_us_per_copy": round(per_copy * 1e6, 1),
    }


if __name__ == "__main__":
    raise SystemExit(main())
