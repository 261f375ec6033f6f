"""The simulator's promises: determinism, labels that follow the detector table on the data it emitted,
the span contract, and the HLC's causality property across services."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from turnlens.kernel import contract as c
from turnlens.kernel.findings import FINDING_KINDS
from turnlens.sample_data.scenarios import SCENARIOS
from turnlens.sample_data.simulate import Simulation, parse_mix, to_request

from .oracle import findings, turn_of_spans


def _run(**kwargs: object) -> tuple[Simulation, list[ReadableSpan]]:
    sim = Simulation(**kwargs)  # type: ignore[arg-type]
    return sim, [span for batch in sim.batches() for span in batch]


def test_same_seed_same_spans_and_labels_other_seed_other_spans() -> None:
    first, first_spans = _run(sessions=25, seed=11)
    second, second_spans = _run(sessions=25, seed=11)
    assert to_request(first_spans).SerializeToString() == to_request(second_spans).SerializeToString()
    assert first.labels() == second.labels()
    third, third_spans = _run(sessions=25, seed=12)
    assert to_request(third_spans).SerializeToString() != to_request(first_spans).SerializeToString()


def test_labels_are_exactly_what_the_detector_table_finds_in_the_data(mixed) -> None:  # type: ignore[no-untyped-def]
    sim, spans = mixed
    labels = sim.labels()
    labelled = Counter(
        (f["kind"], f["session_id"], f["turn_id"], f["tool_call_id"]) for f in labels["findings"]
    )
    found = findings(spans)
    assert found == labelled
    assert {kind for kind, *_ in labelled} == set(FINDING_KINDS)  # the mix exercises every kind


def test_every_scenario_labels_only_its_declared_kinds_and_clean_ones_nothing(mixed) -> None:  # type: ignore[no-untyped-def]
    sim, _ = mixed
    labels = sim.labels()
    kinds_by_scenario: dict[str, set[str]] = defaultdict(set)
    for turn in labels["turns"]:
        kinds_by_scenario[turn["scenario"]].update(turn["kinds"])
    assert set(kinds_by_scenario) == set(SCENARIOS)
    for name, kinds in kinds_by_scenario.items():
        assert kinds == set(SCENARIOS[name].kinds), name


def test_spans_follow_the_contract(mixed) -> None:  # type: ignore[no-untyped-def]
    sim, spans = mixed
    known_attributes = {v for k, v in vars(c).items() if k.isupper() and isinstance(v, str)}
    identity = turn_of_spans(spans)
    framework_services = {"support-bot", "research-assistant"}
    for span in spans:
        attrs = span.attributes or {}
        service = span.resource.attributes[c.SERVICE_NAME]
        assert c.SERVICE_INSTANCE_ID in span.resource.attributes
        if service in framework_services:  # no contract attribute nor event; a stop's exception at most
            assert not [k for k in attrs if k.startswith("turnlens.")]
            assert all(e.name == "exception" for e in span.events)
            assert attrs.get(c.SESSION_ID) or attrs.get(c.GEN_AI_CONVERSATION_ID) or span.parent is not None
            continue
        assert attrs[c.LAYER] in c.LAYERS and isinstance(attrs[c.HLC], int)
        assert span.context.trace_id in identity  # own identity, or linked to a turn
        assert [k for k in attrs if k.startswith("turnlens.") and k not in known_attributes] == []
        for event in span.events:
            assert event.name in c.EVENT_NAMES
            assert isinstance(event.attributes[c.HLC], int)
            if c.TOOL_TIER in event.attributes:
                assert event.attributes[c.TOOL_TIER] in c.TIERS
            if c.TOOL_DISPATCH in event.attributes:
                assert event.attributes[c.TOOL_DISPATCH] in c.DISPATCH_MODES
    labels = sim.labels()
    turn_ids = {(t["session_id"], t["turn_id"]) for t in labels["turns"]}
    assert all((f["session_id"], f["turn_id"]) in turn_ids for f in labels["findings"])
    framework_turns = [t for t in labels["turns"] if t["ordering"] == "wall_clock"]
    assert framework_turns
    assert all(t["kinds"] == list(SCENARIOS[t["scenario"]].kinds) for t in framework_turns)
    trace_ids = {format(s.context.trace_id, "032x") for s in spans}
    assert all(t["turn_id"] in trace_ids for t in framework_turns)  # a trace without turn id is its own turn


def test_hlc_preserves_happened_before_across_services(mixed) -> None:  # type: ignore[no-untyped-def]
    sim, spans = mixed
    log = sim.fleet.causality_log
    assert log
    last: dict[str, int] = {}
    for node, rule, stamp, remote in log:  # every stamp a node issues is above all it issued before...
        assert stamp > last.get(node, -1)
        last[node] = stamp
        if rule == "receive":  # ...and above the sender's stamp on the message it received
            assert stamp > remote
    by_id = {(s.context.trace_id, s.context.span_id): s for s in spans}
    remote_children = 0
    for span in spans:  # a request leaves a parent span before its remote child starts
        parent = by_id.get((span.context.trace_id, span.parent.span_id)) if span.parent else None
        if parent is None or c.HLC not in (span.attributes or {}):
            continue
        if (
            parent.resource.attributes[c.SERVICE_INSTANCE_ID]
            != span.resource.attributes[c.SERVICE_INSTANCE_ID]
        ):
            remote_children += 1
            assert span.attributes[c.HLC] > parent.attributes[c.HLC]
    assert remote_children > 1000
    identity = turn_of_spans(spans)
    per_turn: dict[tuple[str, str], list[tuple[str, str | None, int]]] = defaultdict(list)
    for span in spans:
        turn = identity.get(span.context.trace_id)
        if turn is None:  # a framework's turn: no contract event, no HLC
            continue
        for event in span.events:
            per_turn[turn].append((event.name, event.attributes.get(c.TOOL_CALL_ID), event.attributes[c.HLC]))
    for events in per_turn.values():  # causal chains of the contract: cancel first, then its echoes
        requested = [h for name, _, h in events if name == c.EV_CANCEL_REQUESTED]
        if requested:
            assert all(
                h > requested[0]
                for name, _, h in events
                if name in (c.EV_CANCEL_RECEIVED, c.EV_CANCEL_ACKNOWLEDGED)
            )
        phases: dict[str | None, dict[str, int]] = defaultdict(dict)
        for name, call_id, h in events:
            phases[call_id].setdefault(name, h)
        for call_id, seen in phases.items():
            chain = [
                seen[n] for n in (c.EV_TOOL_DISPATCHED, c.EV_TOOL_PREPARED, c.EV_TOOL_COMMITTED) if n in seen
            ]
            assert chain == sorted(chain) and len(set(chain)) == len(chain), call_id


def test_sessions_interleave_and_have_several_turns(mixed) -> None:  # type: ignore[no-untyped-def]
    sim, _ = mixed
    turns = sim.labels()["turns"]
    per_session = Counter(t["session_id"] for t in turns)
    assert max(per_session.values()) >= 4 and sum(per_session.values()) / len(per_session) > 1.8
    ordered = sorted(turns, key=lambda t: t["started_unix_nano"])
    switches = sum(
        1 for a, b in zip(ordered, ordered[1:], strict=False) if a["session_id"] != b["session_id"]
    )
    assert switches > len(ordered) * 0.6
    cancelled = sum(t["cancelled"] for t in turns) / len(turns)
    assert 0.15 < cancelled < 0.5


def test_the_chaos_window_slows_every_cancel_inside_it() -> None:
    sim, spans = _run(sessions=60, seed=5, mix=parse_mix("user_stops_stream"))
    window = sim.chaos_window
    assert window is not None
    inside, outside = [], []
    for span in spans:
        names = {e.name: e for e in span.events}
        if span.name == "POST /v1/chat" and c.EV_CANCEL_ACKNOWLEDGED in names:
            requested = names[c.EV_CANCEL_REQUESTED]
            ms = (names[c.EV_CANCEL_ACKNOWLEDGED].attributes[c.HLC] >> 16) - (
                requested.attributes[c.HLC] >> 16
            )
            (inside if window.active(requested.timestamp) else outside).append(ms)
    assert inside and outside
    assert min(inside) > 400 and max(outside) < 100


def test_a_mix_can_name_scenarios_and_weights() -> None:
    assert parse_mix("ghost_commit,skewed_node=3") == {"ghost_commit": 1.0, "skewed_node": 3.0}
    with pytest.raises(ValueError, match="unknown scenario"):
        parse_mix("no_such_thing")
    sim, _ = _run(sessions=8, seed=1, mix=parse_mix("ghost_commit"))
    assert {t["scenario"] for t in sim.labels()["turns"]} == {"ghost_commit"}
