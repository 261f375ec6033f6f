"""Valid spans whose values are hostile never stop the derived state, nor any read of the store.

A refresh computes the turns of every new span in one run: one span that made a query fail would stop the
findings of the whole store until it left by retention. Given rows with such values, a refresh succeeds,
equals the live views, and reads the values as the views document. test_fuzz_values.py sends a seeded
campaign of such spans through a real collector (bench/fuzz_values.py) and reads the store as its users do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stagedstore import StagedStore
from turnlens.kernel import contract as c
from turnlens.queries import catalog

INT64_MAX = 2**63 - 1


def with_hlc(row: dict, packed: int) -> dict:
    """The span as a client would send it with `turnlens.hlc` = packed (and the column it is copied to)."""
    attributes = json.loads(row["attributes"])
    attributes[c.HLC] = packed
    return row | {"hlc": packed, "attributes": json.dumps(attributes)}


def turn_rows(store: Path, turn: str) -> list[tuple]:
    with catalog.connect(store) as con:
        return con.execute(
            "select name, hlc, hlc_source, order_hlc, skew_ms from turn_events where turn_id = ?", [turn]
        ).fetchall()


def test_an_hlc_no_clock_can_carry_orders_its_rows_by_wall_clock_and_the_refresh_goes_on(
    staged: StagedStore, contract_turn: Any, span: Any, builders: Any
) -> None:
    """2^63-1 (its skew against a wall clock overflows int64) and -1 are no HLC: their rows are ordered as
    rows without one, the store keeps what was sent, and the other turns of the same refresh get their
    findings."""
    good = contract_turn(turn="good", trace="tg", session="s-good", charged=False)
    huge = with_hlc(
        span(
            "stream",
            1000,
            3000,
            trace="th",
            turn="huge",
            session="s-bad",
            layer="stream",
            events=[
                builders.event("stream.progress", 1500, **{c.STREAM_TOKENS: 10}),
                builders.event("cancel.requested", 2000, hlc_at=2000),
            ],
        ),
        INT64_MAX,
    )
    huge["events"][0]["hlc"] = -1  # an event's own HLC, negative
    staged.send(good + [huge], at_ms=4000)
    staged.refresh(5000)
    staged.assert_equal_to_live()
    assert "unbilled_side_effect" in staged.kinds("good")

    start, progress, cancel, end = sorted(turn_rows(staged.dir, "huge"), key=lambda row: row[3])
    wall_ms = builders.ns(1000) // 1_000_000
    assert start == ("stream", None, "wall_clock", wall_ms << 16, None)
    assert progress[:3] == ("stream.progress", None, "wall_clock")
    # a valid HLC beside them still counts
    assert cancel[:3] == ("cancel.requested", builders.hlc(2000), "hlc")
    assert end[2] == "wall_clock"
    with catalog.connect(staged.dir) as con:
        [(stored,)] = con.execute("select hlc from spans where turn_id = 'huge'").fetchall()
    assert stored == INT64_MAX, "the store keeps the value as it was sent"


def test_an_event_stamped_long_before_its_span_sorts_first_rather_than_failing(
    staged: StagedStore, span: Any, builders: Any
) -> None:
    """An SDK that leaves an event's time unset sends 0; with its span's HLC 100 ms behind that span's wall
    clock, the span clock of the event would be before the Unix epoch."""
    row = span(
        "stream",
        1000,
        3000,
        trace="tz",
        turn="zero",
        layer="stream",
        hlc_at=900,
        events=[builders.event("stream.progress", 1500, **{c.STREAM_TOKENS: 10})],
    )
    row["events"].append(builders.event("stream.completed", 0) | {"time_unix_nano": 0})
    staged.send([row], at_ms=4000)
    staged.refresh(5000)
    staged.assert_equal_to_live()
    first = sorted(turn_rows(staged.dir, "zero"), key=lambda r: r[3])[0]
    assert first == ("stream.completed", None, "span_clock", 0, None)


def test_a_finish_reason_that_only_looks_like_json_is_no_finish_reason(
    staged: StagedStore, span: Any
) -> None:
    """A model call (a framework's: no HLC) whose finish reasons and output messages are cut-off JSON text."""
    broken = span(
        "chat gpt",
        1000,
        2000,
        trace="tj",
        turn="json",
        attrs={
            "gen_ai.operation.name": "chat",
            "gen_ai.response.finish_reasons": "[",
            "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1"',
        },
    )
    listed = span(
        "chat gpt",
        1000,
        2000,
        trace="tl",
        turn="listed",
        attrs={
            "gen_ai.operation.name": "chat",
            "gen_ai.response.finish_reasons": '["cancelled"]',
        },
    )
    staged.send([broken, listed], at_ms=3000)
    staged.refresh(4000)
    staged.assert_equal_to_live()
    with catalog.connect(staged.dir) as con:
        reasons = dict(
            con.execute(
                "select turn_id, finish_reason from turn_events where source = 'span_start' and model_call"
            ).fetchall()
        )
    assert reasons == {"json": None, "listed": "cancelled"}


def test_an_attribute_key_no_json_path_can_name_names_no_tool_call(staged: StagedStore, span: Any) -> None:
    """A model call's keys are read by pattern (OpenInference's llm.output_messages.N...tool_call.id); one
    with a `"` in it is skipped, and the well-formed key beside it still names the call its tool span ran."""
    model = span(
        "llm",
        1000,
        2000,
        trace="tk",
        turn="keys",
        attrs={
            "openinference.span.kind": "LLM",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call-1",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup",
            'llm.output_messages."0.message.tool_calls.0.tool_call.id': "bad",
        },
    )
    tool = span("tool", 2100, 2200, trace="tk", turn="keys", layer="tool", attrs={"tool.name": "lookup"})
    staged.send([model, tool], at_ms=3000)
    staged.refresh(4000)
    staged.assert_equal_to_live()
    with catalog.connect(staged.dir) as con:
        calls = con.execute("select distinct tool_call_id from turn_events where layer = 'tool'").fetchall()
    assert calls == [("call-1",)]


def test_hostile_approval_lists_and_pause_signals_name_only_what_they_can(
    staged: StagedStore, span: Any, builders: Any
) -> None:
    """The framework readings of a pause read attribute values by shape: a final_result listing approvals
    whose entries are a number, text, an object without a call id or a call id of another type; a
    GraphInterrupt type sent as a number; a resultless tool span ending before it starts. The refresh goes on,
    equals the live views, and reads each as its rule says."""
    entries = [{"tool_name": "send_email", "tool_call_id": "c1"}, {"tool_call_id": 7}, {"tool_name": "x"}]
    entries += [3, "x"]
    final_result = json.dumps({"approvals": entries})
    run = span("run", 1000, 5000, trace="tp", turn="pause", span_id="run",
               attrs={c.GEN_AI_OPERATION_NAME: "invoke_agent", "final_result": final_result})
    tool = {"openinference.span.kind": "TOOL", "tool.name": "send_email", "input.value": "{}"}
    backwards = span("send_email", 3000, 2000, trace="tp", turn="pause", layer="tool", parent="run",
                     span_id="back", attrs=tool)
    interrupt = builders.event("exception", 3150, **{"exception.type": 42})
    numbered = span("send_email", 3100, 3200, trace="tp", turn="pause", layer="tool", parent="run",
                    span_id="numbered", attrs=tool, events=[interrupt])
    staged.send([run, backwards, numbered], at_ms=6000)
    staged.refresh(7000)
    staged.assert_equal_to_live()
    with catalog.connect(staged.dir) as con:
        ledger = con.execute("select tool_call_id, status from side_effects order by all").fetchall()
        turn = con.execute("select status, cancel_origin from turns").fetchall()
    # the list's entries with a call id (7 as text); the span ending before it starts is under 10 ms: a
    # pause; the 100 ms one, whose exception type is no GraphInterrupt, a stop
    listed = [row for row in ledger if row[0] in ("c1", "7")]
    assert listed == [("7", "awaiting_approval"), ("c1", "awaiting_approval")]
    spans = sorted(status for call, status in ledger if call not in ("c1", "7"))
    assert spans == ["awaiting_approval", "interrupted"]
    assert turn == [("cancelled", "inferred.tool_without_result")]


def test_rows_tied_on_the_clock_name_the_least_value_every_time(
    staged: StagedStore, span: Any, builders: Any
) -> None:
    """Two layers log the cancel at the same HLC, two root spans of one trace start at the same instant naming
    different sessions: a view picks by the values themselves (the least), so it answers the same on every
    read and the derived state as the live view."""
    cancels = [
        span(
            layer,
            1000,
            3000,
            trace="tc",
            turn="tied",
            layer=layer,
            hlc_at=1000,
            events=[builders.event("cancel.requested", 2000, hlc_at=2000, **{c.CANCEL_ORIGIN: origin})],
        )
        for layer, origin in (("runtime", "user_typed"), ("http", "user_clicked"))  # the least comes last
    ]
    roots = [
        span("root", 1000, 2000, trace="tr", session="s-zeta", turn=None),
        span("root", 1000, 2000, trace="tr", session="s-alpha", turn=None),
    ]
    staged.send(cancels + roots, at_ms=4000)
    staged.refresh(5000)
    staged.assert_equal_to_live()
    with catalog.connect(staged.dir) as con:
        cancel = con.execute(
            "select requested_layer, origin from cancel_acks where turn_id = 'tied'"
        ).fetchall()
        sessions = con.execute(
            "select distinct session_id from spans where turn_id = ?", [roots[0]["trace_id"]]
        ).fetchall()
    assert cancel == [("http", "user_clicked")]
    assert sessions == [("s-alpha",)]


def test_token_sums_past_a_doubles_precision_are_exact_in_the_derived_state(
    staged: StagedStore, span: Any, builders: Any
) -> None:
    """2^53 + 1 tokens billed: the derived state keeps the same BIGINT the live view sums (a HUGEINT sum would
    be written to Parquet as a DOUBLE, which cannot hold it); a sum past 64 bits is unknown, not an error."""

    def charges(*tokens: int) -> list[dict]:
        return [
            builders.event(
                "billing.charged", 1500, hlc_at=1500, **{c.BILLING_KIND: "tokens", c.BILLING_TOKENS: n}
            )
            for n in tokens
        ]

    staged.send(
        [
            span(
                "billing",
                1000,
                2000,
                trace="tb",
                turn="exact",
                layer="billing",
                hlc_at=1000,
                events=charges(2**53, 1),
            ),
            span(
                "billing",
                1000,
                2000,
                trace="to",
                turn="over",
                layer="billing",
                hlc_at=1000,
                events=charges(INT64_MAX, INT64_MAX),
            ),
        ],
        at_ms=3000,
    )
    staged.refresh(4000)
    staged.assert_equal_to_live()
    with catalog.connect(staged.dir) as con:
        billed = dict(con.execute("select turn_id, tokens_billed from turn_usage").fetchall())
    assert billed == {"exact": 2**53 + 1, "over": None}
