"""Fuzzes the read side with well-formed OTLP whose values are hostile, through a real `turnlens collect`.

bench/fuzz.py breaks the requests; this one keeps every request valid OTLP (JSON and protobuf, every other
request) and breaks what the spans say: contract attributes of every wrong type and extreme value (an HLC of
2^63-1, tokens as text, a finish reason `[` that only looks like JSON), times at 0, at the int64 limit and
ending before they start, events far outside their span, parents that form cycles, links to themselves, ids
that are empty, quoted, 5,000 characters long or the trace id of another turn. Such a span must never stop
the derived state for the whole store, nor a page, an export or an alert rule.

    .venv/bin/python bench/fuzz_values.py --requests 60 --seed 1

It posts the requests over OTLP/HTTP with `turnlens materialize` run beside the collector now and then (a full
build, then refreshes), stops the collector, materialises once more and checks the derived state equals the
views computed live; then reads every view of the catalogue, every dashboard query and the one-turn queries of
a sample of turns as the dashboard does (into pandas), and runs a few `turnlens export`s and `turnlens alerts
run` as processes. It prints a JSON summary; the exit code is 0 only when no request got a 5xx, the collector
stopped cleanly, and nothing after failed.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fuzz import Collector, http_request, send_http
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from turnlens.kernel import contract

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from derivedstate import catalogue_rows, live_rows  # noqa: E402 - tests/support: the live views the tests compare

I64 = 2**63 - 1
U64 = 2**64 - 1  # OTLP's times are fixed64: past this, no request can carry them
NOW_NS = 1_795_000_000_000_000_000
HLC = (NOW_NS // 1_000_000) << 16
ODD_TEXT = [
    "",
    " ",
    "'",
    '"',
    "\\",
    "%",
    "_",
    "%s",
    "{}",
    "\n\t",
    "\x00x",
    "é漢🙂",
    "a" * 5000,
    "NULL",
    "null",
    "1e309",
    "-0",
    "NaN",
    "Infinity",
    "true",
    "[1,2]",
    "[",
    '{"a":1}',
    "..",
    "$.x",
    "'; drop table spans; --",
    "\u202e",
]
ODD_NUMBERS: list[Any] = [0, -1, 1, I64, -I64 - 1, 2**53 + 1, 1.5, -0.0, 1e308, float("nan"), float("inf")]
ODD_VALUES: list[Any] = [*ODD_TEXT, *ODD_NUMBERS, True, False, [], [1, "a"], {}, {"x": {"y": []}}, b"\x00"]
# what a contract or framework value can be when it is right, so that the spans reach the detectors' paths
PLAUSIBLE: list[Any] = [
    "tool",
    "stream",
    "runtime",
    "http",
    "third_party",
    "billing",
    "chat",
    "LLM",
    "AGENT",
    "TOOL",
    "invoke_agent",
    "irreversible",
    "reversible",
    "eager",
    "speculative",
    "user_clicked",
    "tokens",
    "side_effect",
    '["stop"]',
    '["cancelled"]',
    "asyncio.CancelledError",
    "langgraph.errors.GraphInterrupt",
    "execute_tool",
    "<not specified>",
    "chain",
    "{}",
    "CancelledError()Traceback (most recent call last):",
    "GraphInterrupt((Interrupt(value={'question': 'Send?'}),))",
    '{"generations": [[{"generation_info": {"finish_reason": "stop"}}]]}',
    '{"generations": [[{"generation_info": {"finish_reason": [1]}}]], "x": "\\u0000"}',
    '{"approvals": [{"tool_name": "send_email", "tool_call_id": "c1"}, {"tool_call_id": 7}, "x"]}',
]
KEYS = [
    "session.id",
    "gen_ai.conversation.id",
    "turnlens.turn.id",
    "turnlens.layer",
    "turnlens.hlc",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "tool.name",
    "tool_call.id",
    "turnlens.idempotency_key",
    "turnlens.tool.tier",
    "turnlens.tool.dispatch",
    "turnlens.tool.billable",
    "turnlens.tool.requires_approval",
    "turnlens.cancel.origin",
    "gen_ai.response.finish_reasons",
    "turnlens.stream.tokens",
    "turnlens.third_party.status",
    "turnlens.third_party.replayed",
    "turnlens.billing.kind",
    "turnlens.billing.amount",
    "turnlens.billing.tokens",
    "turnlens.input.kind",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "operation.cost",
    "llm.cost.total",
    "gen_ai.operation.name",
    "openinference.span.kind",
    "llm.request.type",
    "traceloop.span.kind",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "gen_ai.output.messages",
    "llm.output_messages.0.message.tool_calls.0.tool_call.id",
    "exception.type",
    "exception.message",
    "langsmith.span.kind",
    "langsmith.metadata.session_id",
    "langsmith.metadata.thread_id",
    "gen_ai.completion",
    "gcp.vertex.agent.invocation_id",
    "gcp.vertex.agent.event_id",
    "input.value",
    "output.value",
    "final_result",
    # keys no JSON path can name, shaped like the ones the framework readings look up by pattern
    'llm.output_messages."0.message.tool_calls.0.tool_call.id',
    'gen_ai.completion.0.tool_calls."].id',
    "",
    '"',
    "a\\b",
]
# the contract's event names, and names of events that are no step (exceptions, chunks, GenAI events)
STEPS = [*contract.EVENT_NAMES, "exception", "gen_ai.choice", "chunk", ""]
TIMES = [0, 1, NOW_NS, NOW_NS - 10**15, NOW_NS + 10**15, I64, 2**62, U64]


def any_value(value: Any) -> dict[str, Any]:
    """An OTLP/JSON AnyValue (NaN and the infinities as the strings ProtoJSON writes for them)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        if value != value or abs(value) == float("inf"):
            return {"doubleValue": "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")}
        return {"doubleValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": "AAE="}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": any_value(v)} for k, v in value.items()]}}
    return {"stringValue": value}


def key_values(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": any_value(value)} for key, value in attributes.items()]


def hostile_request(rng: random.Random, serial: int, traces: int = 12) -> dict[str, Any]:
    """One ExportTraceServiceRequest (OTLP/JSON) of a few resources, each with traces of one to six spans."""
    resources = []
    for _ in range(rng.randint(1, 3)):
        spans = []
        for t in range(traces):
            # now and then the one trace id every request shares
            trace = f"{rng.getrandbits(128):032x}" if rng.random() < 0.95 else "f" * 32
            ids = [f"{rng.getrandbits(64) or 1:016x}" for _ in range(rng.randint(1, 6))]
            named = {
                "session.id": rng.choice(["hs-1", "hs-2", rng.choice(ODD_TEXT)]),
                "turnlens.turn.id": rng.choice([f"ht-{serial}-{t}", rng.choice(ODD_TEXT), trace]),
            }
            for i, span_id in enumerate(ids):
                attributes = dict(named) if rng.random() < 0.8 else {}
                for _ in range(rng.randint(0, 6)):
                    attributes[rng.choice(KEYS)] = rng.choice(
                        [*ODD_VALUES, *PLAUSIBLE, HLC + rng.randint(-(10**9), 10**9)]
                    )
                start = rng.choice([*TIMES, *[NOW_NS + rng.randint(0, 10**10)] * 6])
                end = rng.choice(
                    [start, min(U64, start + rng.randint(0, 10**10)), 0, 1, I64, max(0, start - 10**9)]
                )
                events = [
                    {
                        "timeUnixNano": str(
                            rng.choice(
                                [*TIMES, *[min(U64, max(0, start + rng.randint(-(10**9), 10**10)))] * 4]
                            )
                        ),
                        "name": rng.choice(STEPS),
                        "attributes": key_values(
                            {
                                rng.choice(KEYS): rng.choice(
                                    [*ODD_VALUES, *PLAUSIBLE, HLC + rng.randint(-(10**9), 10**9)]
                                )
                                for _ in range(rng.randint(0, 4))
                            }
                        ),
                    }
                    for _ in range(rng.choice([0, 0, 1, 3, 30]))
                ]
                links = [
                    {
                        "traceId": rng.choice([trace, f"{rng.getrandbits(128):032x}"]),
                        "spanId": rng.choice(ids),
                        "attributes": key_values({"k": rng.choice(ODD_VALUES)}),
                    }
                    for _ in range(rng.choice([0, 0, 1, 2]))
                ]
                span: dict[str, Any] = {
                    "traceId": trace,
                    "spanId": span_id,
                    "name": rng.choice([*STEPS, "chat gpt", "invoke_agent x"]),
                    "kind": rng.randint(0, 6),
                    "startTimeUnixNano": str(start),
                    "endTimeUnixNano": str(end),
                    "attributes": key_values(attributes),
                    "events": events,
                    "links": links,
                    "status": {"code": rng.randint(0, 2), "message": rng.choice([*ODD_TEXT, *PLAUSIBLE])},
                }
                if i and rng.random() < 0.9:
                    span["parentSpanId"] = rng.choice(ids)  # itself, or a cycle, now and then
                spans.append(span)
        resource = key_values(
            {
                "service.name": rng.choice(["svc", rng.choice(ODD_TEXT)]),
                "service.instance.id": rng.choice(["n1", "n2", rng.choice(ODD_TEXT)]),
            }
        )
        resources.append(
            {"resource": {"attributes": resource}, "scopeSpans": [{"scope": {"name": "h"}, "spans": spans}]}
        )
    return {"resourceSpans": resources}


def as_protobuf(document: dict[str, Any]) -> bytes:
    """The request as protobuf: OTLP/JSON writes ids in hex where ProtoJSON reads bytes as base64."""

    def ids(item: dict[str, Any]) -> dict[str, Any]:
        return item | {
            key: base64.b64encode(bytes.fromhex(item[key])).decode()
            for key in ("traceId", "spanId", "parentSpanId")
            if key in item
        }

    proto = copy.deepcopy(document)
    for resource in proto["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            scope["spans"] = [
                ids(span) | {"links": [ids(link) for link in span["links"]]} for span in scope["spans"]
            ]
    return json_format.ParseDict(proto, ExportTraceServiceRequest()).SerializeToString()


@dataclass
class Summary:
    requests: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    collector_exit: int | None = None
    refreshes: int = 0  # materialiser runs, the last one after the collector stopped
    spans: int = 0
    turns: int = 0
    turns_read: int = 0
    exports: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return (
            not self.failures
            and self.collector_exit == 0
            and not any(a.startswith("5") for a in self.answers)
        )

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "answers": dict(self.answers), "passed": self.passed})


def _turnlens(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "turnlens.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def materialize(store: Path, summary: Summary) -> None:
    """`turnlens materialize` once, as a process; a failure is one line of the summary."""
    ran = _turnlens("materialize", "--store", str(store), "--margin", "0", "--json")
    summary.refreshes += 1
    if ran.returncode != 0:
        summary.failures.append(f"materialize exited {ran.returncode}: {ran.stderr.strip()[-400:]}")


DASHBOARD_PARAMS = {
    "from_ms": None,
    "to_ms": None,
    "bucket_ms": 60_000,
    "hours": 24,
    "kinds": None,
    "limit": 500,
    "session": None,
    "statuses": None,
    "tiers": None,
    "tools": None,
    "window_size": "1m",
}


def compare_with_live(store: Path, summary: Summary) -> None:
    """The derived state the refreshes left must equal the same views computed live from every stored copy,
    and the live views read twice must answer the same (NaN, which a hostile cost can be, equal to itself; a
    double to 12 significant digits: a sum's last bit depends on the order its rows were added in, and hostile
    skews of 10^12 ms put that bit above any fixed number of decimals)."""
    derived, live, again = catalogue_rows(store), live_rows(store), live_rows(store)
    for view, rows in derived.items():
        for name, other in (("derived", rows), ("live read again", again[view])):
            ours = Counter(repr(_comparable(row)) for row in other)
            theirs = Counter(repr(_comparable(row)) for row in live[view])
            if ours != theirs:
                only_ours, only_live = sum((ours - theirs).values()), sum((theirs - ours).values())
                summary.failures.append(
                    f"{name} {view} != live: {only_ours} rows only {name}, {only_live} only live"
                )


def _comparable(value: Any) -> Any:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else float(f"{value:.12g}")
    if isinstance(value, list | tuple):
        return type(value)(_comparable(item) for item in value)
    if isinstance(value, dict):  # a struct column
        return {key: _comparable(item) for key, item in value.items()}
    return value


def read_everything(
    store: Path, summary: Summary, *, sample_turns: int, exports: int, rng: random.Random
) -> None:
    """What a user would open: every view, every dashboard query, the turn page of a sample of turns, exports
    and the alert rules; each failure recorded as one line."""
    from turnlens.dashboard import data
    from turnlens.queries import catalog

    materialize(store, summary)
    compare_with_live(store, summary)
    with catalog.reading(store) as con:
        listed = (
            "select view_name from duckdb_views() where not internal and database_name = current_database()"
        )
        views = [view for (view,) in con.execute(listed).fetchall()]
        for view in sorted(views):
            try:
                con.execute("select * from query_table($view)", {"view": view}).df()
            except Exception as exc:  # noqa: BLE001 - every failure is a finding
                summary.failures.append(f"view {view}: {type(exc).__name__}: {str(exc)[:300]}")
        for sql in sorted(Path(data.__file__).with_name("sql").glob("*.sql")):
            try:
                data._run_sql(con, sql.stem, DASHBOARD_PARAMS)
            except Exception as exc:  # noqa: BLE001
                summary.failures.append(f"dashboard {sql.stem}: {type(exc).__name__}: {str(exc)[:300]}")
        [(summary.spans,)] = con.execute("select count(*) from spans").fetchall()
        turns = con.execute("select session_id, turn_id from turns order by all").fetchall()
    summary.turns = len(turns)
    sample = rng.sample(turns, min(sample_turns, len(turns)))
    with catalog.reading(store) as con:
        for session, turn in sample:
            for name, frame in data.run_turn(con, session, turn).items():
                if isinstance(frame, str):
                    summary.failures.append(f"turn page {name} of {session!r}/{turn!r}: {frame[:300]}")
            summary.turns_read += 1
    printable = [(s, t) for s, t in sample if s and t and "\x00" not in s + t and not s.startswith("-")]
    for session, turn in printable[:exports]:
        ran = _turnlens(
            "export",
            "--store",
            str(store),
            "--session",
            session,
            "--turn",
            turn,
            "--format",
            "json",
            "--out",
            "-",
        )
        summary.exports += 1
        if ran.returncode != 0:
            summary.failures.append(
                f"export {session!r}/{turn!r} exited {ran.returncode}: {ran.stderr[-300:]}"
            )
    with tempfile.TemporaryDirectory() as state:
        ran = _turnlens(
            "alerts",
            "run",
            "--store",
            str(store),
            "--at",
            "newest",
            "--state",
            f"{state}/state.json",
            "--notify",
            f"file:{state}/alerts.jsonl",
        )
        if ran.returncode == 3:
            summary.failures.append(f"alerts run exited 3: {ran.stderr.strip()[-400:]}")


def run(
    requests: int, seed: int, store: Path, *, refreshes: int = 2, sample_turns: int = 40, exports: int = 4
) -> Summary:
    """Sends the requests; every requests/refreshes of them, `turnlens materialize` runs beside the collector
    (the first a full build, the next refreshes of what came since), and once more after it stopped."""
    started = time.monotonic()
    rng = random.Random(seed)
    summary = Summary()
    store.mkdir(parents=True, exist_ok=True)
    collector = Collector(store)
    every = max(1, -(-requests // max(1, refreshes)))
    try:
        for serial in range(requests):
            document = hostile_request(rng, serial)
            if serial % 2:  # every other request as protobuf, which the compiled decoder reads
                body = as_protobuf(document)
                summary.answers[send_http(collector.http, http_request(body))] += 1
            else:
                body = json.dumps(document).encode()
                summary.answers[send_http(collector.http, http_request(body, json=True))] += 1
            summary.requests += 1
            if (serial + 1) % every == 0 and serial + 1 < requests:
                materialize(store, summary)
    finally:
        summary.collector_exit = collector.stop()
    read_everything(store, summary, sample_turns=sample_turns, exports=exports, rng=rng)
    summary.seconds = round(time.monotonic() - started, 1)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--store", type=Path, help="keep the store here (default: a temporary folder)")
    parser.add_argument("--refreshes", type=int, default=3, help="materialiser runs while the requests go in")
    parser.add_argument("--sample-turns", type=int, default=40, help="turns whose page is read")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        store = args.store or Path(scratch) / "store"
        summary = run(
            args.requests, args.seed, store, refreshes=args.refreshes, sample_turns=args.sample_turns
        )
    print(summary.to_json())
    return 0 if summary.passed else 1


if __name__ == "__main__":
    sys.exit(main())
