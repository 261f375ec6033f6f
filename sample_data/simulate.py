"""Plays sessions of mixed scenarios on the fleet in simulated time and hands out finished spans in
batches, with the ground-truth labels of everything it played.

Sessions arrive as a Poisson process, each has several turns separated by the user's think time, and
their turns interleave in time across the fleet's services. One seed gives the same spans and labels.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from turnlens.kernel.findings import FINDING_KINDS
from turnlens.sample_data.fleet import MS, Fleet
from turnlens.sample_data.scenarios import SCENARIOS, Scenario
from turnlens.sample_data.turn import Session, Turn, lognormal

LABELS_FORMAT = "turnlens-labels/1"
DEFAULT_START_NS = (
    1_767_258_000 * 1_000_000_000
)  # 2026-01-01T09:00:00Z: a fixed start keeps files reproducible
MINUTE_NS = 60_000 * MS


def parse_mix(text: str | None) -> dict[str, float]:
    """`a,b` (equal weights) or `a=3,b=1`; None or empty: every scenario at its default weight."""
    if not text:
        return {name: s.weight for name, s in SCENARIOS.items()}
    mix: dict[str, float] = {}
    for part in text.split(","):
        name, _, weight = part.strip().partition("=")
        if name not in SCENARIOS:
            raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
        mix[name] = float(weight) if weight else 1.0
        if mix[name] <= 0:
            raise ValueError(f"scenario {name!r} needs a positive weight")
    return mix


@dataclass
class ChaosWindow:
    """A chaos experiment: every hop of the cancel chain delayed by ~100 ms for a while."""

    start_ns: int
    end_ns: int
    delay_ms: tuple[float, float] = (100.0, 160.0)

    def active(self, t_ns: int) -> bool:
        return self.start_ns <= t_ns < self.end_ns


@dataclass
class TurnRecord:
    turn: Turn
    session_id: str
    scenario: str
    started_ns: int
    ended_ns: int = 0


@dataclass
class Simulation:
    """Sessions of the mix played on one fleet. Call `batches()` to run it and take the spans."""

    sessions: int
    seed: int = 7
    mix: Mapping[str, float] = field(default_factory=lambda: parse_mix(None))
    start_ns: int = DEFAULT_START_NS
    sessions_per_minute: float = 4.0
    chaos: bool = True  # the cancel-chain delay window, a quarter of the way in, 8 minutes long
    chaos_delay_ms: float = 100.0  # added to every cancel hop inside the window (up to 1.6 times this)
    hop_ms: float = 3.0  # median network hop between services (each cancel hop too)
    record_causality: bool = False

    def __post_init__(self) -> None:
        self.rng = random.Random(f"sim-{self.seed}")
        self.fleet = Fleet(self.start_ns, self.seed, record_causality=self.record_causality)
        self.records: list[TurnRecord] = []
        self.started_sessions = 0
        self.finished_sessions = 0
        expected_span_ns = int(max(self.sessions, 1) / self.sessions_per_minute * MINUTE_NS)
        chaos_start = self.start_ns + expected_span_ns // 4
        self.chaos_window = (
            ChaosWindow(
                chaos_start, chaos_start + 8 * MINUTE_NS, (self.chaos_delay_ms, self.chaos_delay_ms * 1.6)
            )
            if self.chaos
            else None
        )
        names = list(self.mix)
        self._names, self._weights = names, [self.mix[n] for n in names]
        turn_names = [n for n in names if not SCENARIOS[n].framework]
        self._turn_names = turn_names or names
        self._turn_weights = [self.mix[n] for n in self._turn_names]
        self.fleet.scheduler.at(self.start_ns, self._arrive)

    # --- the session process ----------------------------------------------------------------------

    def _arrive(self) -> None:
        if self.sessions and self.started_sessions >= self.sessions:
            return
        self.started_sessions += 1
        session = Session(f"sess-{self.rng.getrandbits(64):016x}", f"user-{self.rng.randrange(1, 400):04d}")
        first = SCENARIOS[self.rng.choices(self._names, self._weights)[0]]
        turns = 1 + min(7, int(self.rng.expovariate(1 / 2.2)))
        self._play(session, first, turns)
        gap = self.rng.expovariate(self.sessions_per_minute) * MINUTE_NS
        self.fleet.scheduler.at(self.fleet.scheduler.now_ns + max(1, int(gap)), self._arrive)

    def _play(self, session: Session, scenario: Scenario, remaining: int) -> None:
        now = self.fleet.scheduler.now_ns
        turn = Turn(self.fleet, self.rng, session, scenario.name, now, self._cancel_delay, self.hop_ms)
        end_ms = turn.finish(scenario.play(turn))
        session.turns += 1
        record = TurnRecord(turn, session.session_id, scenario.name, now, now + int(end_ms * MS))
        self.records.append(record)
        if remaining <= 1:
            self.fleet.scheduler.at(record.ended_ns + 1, self._session_done)
            return
        think = lognormal(self.rng, 20_000, 0.8, 2_000, 300_000)
        if scenario.framework:
            follow = scenario
        else:
            follow = SCENARIOS[self.rng.choices(self._turn_names, self._turn_weights)[0]]
        self.fleet.scheduler.at(
            record.ended_ns + int(think * MS), lambda: self._play(session, follow, remaining - 1)
        )

    def _session_done(self) -> None:
        self.finished_sessions += 1

    def _cancel_delay(self, t_ns: int) -> float:
        if self.chaos_window is None or not self.chaos_window.active(t_ns):
            return 0.0
        return self.rng.uniform(*self.chaos_window.delay_ms)

    # --- running ----------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return len(self.fleet.scheduler) == 0

    def step(self, until_ns: int | None = None) -> list[ReadableSpan]:
        """Plays everything due up to `until_ns` (to the end when None); returns the spans that ended."""
        self.fleet.scheduler.run_until(until_ns)
        return self.fleet.sink.drain()

    def batches(self, *, slice_ns: int = MINUTE_NS, max_spans: int = 2048) -> Iterator[list[ReadableSpan]]:
        """Runs the whole simulation a slice of simulated time at a time; yields lists of finished spans."""
        pending: list[ReadableSpan] = []
        while not self.done:
            pending.extend(self.step(self.fleet.scheduler.now_ns + slice_ns))
            while len(pending) >= max_spans:
                yield pending[:max_spans]
                pending = pending[max_spans:]
        pending.extend(self.fleet.sink.drain())
        if pending:
            yield pending

    # --- ground truth -----------------------------------------------------------------------------

    def labels(self) -> dict[str, Any]:
        """The labels document (see sample_data/README.md for its shape)."""
        findings: list[dict[str, Any]] = []
        turns: list[dict[str, Any]] = []
        for record in self.records:
            turn = record.turn
            turn_id = turn.turn_id if turn.contract else (turn.trace_id_hex or "")
            turns.append(
                {
                    "session_id": record.session_id,
                    "turn_id": turn_id,
                    "scenario": record.scenario,
                    "started_unix_nano": record.started_ns,
                    "ended_unix_nano": record.ended_ns,
                    "cancelled": turn.cancelled,
                    "ordering": "hlc" if turn.contract else "wall_clock",
                    "kinds": sorted({label.kind for label in turn.labels}),
                }
            )
            # a framework's turn is its trace, known once its first span started
            findings.extend(label.as_dict() | {"turn_id": turn_id} for label in turn.labels)
        incidents: list[dict[str, Any]] = []
        if self.chaos_window is not None:
            lo, hi = self.chaos_window.delay_ms
            incidents.append(
                {
                    "name": "cancel_chain_delay",
                    "start_unix_nano": self.chaos_window.start_ns,
                    "end_unix_nano": self.chaos_window.end_ns,
                    "description": f"every hop of every cancel chain delayed by {lo:.0f}-{hi:.0f} ms (the "
                    "chaos experiment): cancel-to-ack P95 > 100 ms over 5 min (P2), P99 > 500 ms (P1)",
                    "expect_alerts": ["cancel_to_ack_p95 (P2)", "cancel_to_ack_p99 (P1)"],
                }
            )
        for node in self.fleet.nodes.values():
            if node.offset_ns:
                incidents.append(
                    {
                        "name": "node_clock_offset",
                        "node": node.name,
                        "offset_ms": node.spec.offset_ms,
                        "description": f"{node.name}'s wall clock is {node.spec.offset_ms:+.0f} ms off; "
                        "every turn that touches it (scenario skewed_node) has a causal inversion",
                    }
                )
        return {
            "format": LABELS_FORMAT,
            "seed": self.seed,
            "sessions": self.started_sessions,
            "start_unix_nano": self.start_ns,
            "end_unix_nano": max((r.ended_ns for r in self.records), default=self.start_ns),
            "mix": dict(self.mix),
            "kinds": list(FINDING_KINDS),
            "scenarios": {
                name: {"kinds": list(s.kinds), "description": s.description, "framework": s.framework}
                for name, s in SCENARIOS.items()
                if name in self.mix
            },
            "findings": findings,
            "turns": turns,
            "incidents": incidents,
        }


def to_request(spans: list[ReadableSpan]) -> ExportTraceServiceRequest:
    """The OTLP export request the SDK's own exporters would send for these spans."""
    return encode_spans(spans)
