"""`turnlens simulate`: plays the simulated fleet into OTLP JSON Lines, a live OTLP/HTTP endpoint, or
both, with the ground-truth labels beside; `--fast-spans` makes benchmark volumes from pre-encoded
requests."""

from __future__ import annotations

import argparse
import gzip
import signal
import sys
import time
import urllib.request
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from tqdm import tqdm
from turnlens.sample_data import otlp_json
from turnlens.sample_data.scenarios import SCENARIOS
from turnlens.sample_data.simulate import DEFAULT_START_NS, MINUTE_NS, Simulation, parse_mix, to_request


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="generate agent-fleet traffic with ground-truth labels",
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--sessions", type=int, default=120, help="sessions to play (0 with --rate: endless)")
    parser.add_argument(
        "--scenarios",
        default=None,
        help="a,b (equal weights) or a=3,b=1; default: every scenario at its default weight",
    )
    parser.add_argument("--seed", type=int, default=7, help="same seed, same spans and labels")
    parser.add_argument(
        "--endpoint", default=None, help="send live over OTLP/HTTP to this URL (e.g. http://127.0.0.1:4318)"
    )
    parser.add_argument("--token", default=None, help="bearer token for --endpoint")
    parser.add_argument("--out", type=Path, default=None, help="write OTLP JSON Lines to FILE.jsonl[.gz]")
    parser.add_argument("--labels", type=Path, default=None, help="write the ground-truth labels (JSON) here")
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="live mode: sessions per second, simulated time runs at wall-clock speed",
    )
    parser.add_argument(
        "--start",
        default=None,
        help="ISO time of the first session, or 'now'; default: a fixed instant for --out, "
        "so that the recent past ends now for --endpoint",
    )
    parser.add_argument("--sessions-per-minute", type=float, default=4.0, help="session arrival rate")
    parser.add_argument("--no-chaos", action="store_true", help="leave out the cancel-chain delay window")
    parser.add_argument(
        "--chaos-delay-ms",
        type=float,
        default=100.0,
        help="delay added to every cancel hop inside the chaos window",
    )
    parser.add_argument("--hop-ms", type=float, default=3.0, help="median network hop between services")
    parser.add_argument(
        "--fast-spans",
        type=int,
        default=None,
        help="benchmark mode: this many spans from pre-encoded requests, no labels",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and the findings each labels")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        for name, scenario in SCENARIOS.items():
            print(f"{name:34} {','.join(scenario.kinds) or '(clean)':70} weight {scenario.weight:g}")
        return 0
    if not args.out and not args.endpoint:
        print("turnlens simulate: give --out FILE and/or --endpoint URL", file=sys.stderr)
        return 2
    if args.fast_spans:
        return _run_fast(args)
    try:
        mix = parse_mix(args.scenarios)
    except ValueError as exc:
        print(f"turnlens simulate: {exc}", file=sys.stderr)
        return 2
    sessions_per_minute = args.rate * 60 if args.rate else args.sessions_per_minute
    sim = Simulation(
        sessions=args.sessions,
        seed=args.seed,
        mix=mix,
        start_ns=_start_ns(args, sessions_per_minute),
        sessions_per_minute=sessions_per_minute,
        chaos=not args.no_chaos,
        chaos_delay_ms=args.chaos_delay_ms,
        hop_ms=args.hop_ms,
    )
    with ExitStack() as stack:
        sink = _Sinks(args, stack)
        bar = tqdm(total=args.sessions or None, unit="session", disable=args.quiet, file=sys.stderr)
        stack.callback(bar.close)
        if args.rate:
            _run_live(sim, sink, bar)
        else:
            for batch in sim.batches():
                sink.write(batch)
                bar.update(sim.finished_sessions - bar.n)
            bar.update(sim.finished_sessions - bar.n)
    if args.labels:
        args.labels.parent.mkdir(parents=True, exist_ok=True)
        args.labels.write_bytes(orjson.dumps(sim.labels(), option=orjson.OPT_INDENT_2) + b"\n")
    labels = sim.labels()
    print(
        f"simulated {sim.started_sessions} sessions, {len(labels['turns'])} turns, {sink.spans} spans, "
        f"{len(labels['findings'])} labelled findings"
        + (f"; {sink.failed} spans the endpoint did not accept" if sink.failed else ""),
        file=sys.stderr,
    )
    return 1 if sink.failed else 0


def _start_ns(args: argparse.Namespace, sessions_per_minute: float) -> int:
    if args.start == "now" or (args.start is None and args.rate):
        return time.time_ns()
    if args.start:
        return int(datetime.fromisoformat(args.start.replace("Z", "+00:00")).timestamp() * 1e9)
    if args.endpoint and not args.out:  # backfill: the simulated period ends about now
        span_ns = int(args.sessions / sessions_per_minute * MINUTE_NS) + 5 * MINUTE_NS
        return time.time_ns() - span_ns
    return DEFAULT_START_NS


def _run_live(sim: Simulation, sink: _Sinks, bar: tqdm) -> None:
    """Simulated time follows the wall clock: spans leave as their turns happen."""
    stop = {"now": False}
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        while not stop["now"] and not sim.done:
            sink.write(sim.step(time.time_ns()))
            bar.update(sim.finished_sessions - bar.n)
            time.sleep(0.25)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        sink.write(sim.fleet.sink.drain())


class _Sinks:
    """Where the spans go: a JSON Lines file (one export request a line), an OTLP/HTTP endpoint, or both."""

    def __init__(self, args: argparse.Namespace, stack: ExitStack) -> None:
        self.spans = 0
        self.failed = 0
        self.file = open_output(args.out, stack) if args.out else None
        self.exporter: Any = None
        if args.endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
            self.exporter = OTLPSpanExporter(endpoint=traces_url(args.endpoint), headers=headers, timeout=30)
            stack.callback(self.exporter.shutdown)

    def write(self, spans: list[ReadableSpan]) -> None:
        if not spans:
            return
        for start in range(0, len(spans), 512):
            chunk = spans[start : start + 512]
            self.spans += len(chunk)
            if self.file is not None:
                self.file.write(otlp_json.encode_line(to_request(chunk)))
            if self.exporter is not None:
                if self.exporter.export(chunk) is not SpanExportResult.SUCCESS:
                    self.failed += len(chunk)


class _Output(Protocol):
    def write(self, data: bytes, /) -> int: ...


def open_output(path: Path, stack: ExitStack) -> _Output:
    """A file for JSON Lines, gzip-compressed when it ends in .gz (mtime 0: same seed, same bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = stack.enter_context(open(path, "wb"))
    if path.suffix == ".gz":
        return stack.enter_context(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename=""))
    return raw


def traces_url(endpoint: str) -> str:
    """An OTLP/HTTP base URL (http://host:4318) or the full traces URL, as the traces URL."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def _run_fast(args: argparse.Namespace) -> int:
    """Pre-encoded protobuf requests, POSTed as they are or written as JSON Lines."""
    from turnlens.sample_data.bulk import counted_requests

    started = time.perf_counter()
    spans = 0
    url = traces_url(args.endpoint) if args.endpoint else None
    headers = {"Content-Type": "application/x-protobuf"}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    with ExitStack() as stack:
        out = open_output(args.out, stack) if args.out else None
        bar = stack.enter_context(
            tqdm(total=args.fast_spans, unit="span", unit_scale=True, disable=args.quiet, file=sys.stderr)
        )
        for data, count in counted_requests(args.fast_spans, seed=args.seed):
            if out is not None:
                out.write(otlp_json.encode_line(ExportTraceServiceRequest.FromString(data)))
            if url:
                post = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(post, timeout=60) as response:
                    response.read()
            spans += count
            bar.update(count)
    elapsed = time.perf_counter() - started
    print(f"fast mode: {spans} spans in {elapsed:.1f} s ({spans / elapsed:,.0f} spans/s)", file=sys.stderr)
    return 0
