"""Given rows → expected rows for each analytic view,, on one store of hand-built turns and edge cases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import duckdb
import pytest
from turnlens.kernel import contract as c
from turnlens.queries import catalog, turn_queries

REGISTRY = """
[tools.send_invoice]
tier = "soft_irreversible"
dispatch = "eager"            # the spans say speculative: the audit must notice

[tools.search_web]
tier = "read_only"

[tools.never_called]
tier = "read_only"
owner = "search-team"
"""


def _rows(b: Any) -> list[dict]:
    span, event = b.span, b.event
    rows: list[dict] = []
    rows += b.turn(session="s-clean", turn="clean", trace="clean", key="k-clean")
    rows += b.turn(
        session="s-cancel",
        turn="cancelled",
        trace="cancelled",
        key="k-cancel",
        cancel_at=1000,
        dispatch_at=None,
    )

    # two events in the same millisecond on two nodes: the HLC's logical counter orders them, although
    # the second one's wall clock reads 0.6 ms earlier (within the clock's resolution: no finding)
    same = dict(session="s-same", turn="same_ms", trace="same_ms")
    rows += [
        span(
            "POST /chat",
            0,
            1000,
            span_id="root",
            layer="http",
            node="gw",
            hlc_at=0,
            kind="server",
            **same,
            events=[event(c.EV_USER_INPUT, 500.8, hlc_at=(500, 1))],
        ),
        span(
            "stream",
            100,
            900,
            span_id="stream",
            parent="root",
            layer="stream",
            node="streamer",
            hlc_at=100,
            **same,
            events=[event(c.EV_STREAM_PROGRESS, 500.2, hlc_at=(500, 2), **{c.STREAM_TOKENS: 3})],
        ),
    ]

    # a cancel that arrives in another trace (a separate request from the client), linked to the turn
    rows += [
        span(
            "POST /chat",
            0,
            2000,
            span_id="root",
            layer="http",
            node="gw",
            hlc_at=0,
            kind="server",
            session="s-linked",
            turn="linked",
            trace="linked-turn",
        ),
        span(
            "POST /cancel",
            800,
            820,
            span_id="cancel",
            layer="http",
            node="gw",
            hlc_at=800,
            kind="server",
            session=None,
            turn=None,
            trace="linked-cancel",
            links=[("linked-turn", "root")],
            events=[
                event(c.EV_CANCEL_REQUESTED, 805, hlc_at=805, **{c.CANCEL_ORIGIN: "user_typed"}),
                event(c.EV_CANCEL_ACKNOWLEDGED, 815, hlc_at=815),
            ],
        ),
    ]

    # a turn whose spans never ended (the process died mid-call)
    rows += [
        span(
            "POST /chat",
            0,
            None,
            span_id="root",
            layer="http",
            node="gw",
            hlc_at=0,
            kind="server",
            session="s-open",
            turn="open",
            trace="open",
        ),
        span(
            "execute_tool search_web",
            50,
            None,
            span_id="tool",
            parent="root",
            node="tools",
            hlc_at=50,
            session="s-open",
            turn="open",
            trace="open",
            attrs={
                c.GEN_AI_OPERATION_NAME: "execute_tool",
                c.TOOL_NAME: "search_web",
                c.TOOL_CALL_ID: "c-open",
                c.TOOL_TIER: "read_only",
            },
        ),
    ]

    # a node far ahead in time: `fast` runs 500 ms ahead; `slow` receives its HLC and carries it
    ahead = dict(session="s-ahead", turn="ahead", trace="ahead")
    rows += [
        span("invoke_agent", 1500, 1600, span_id="fast", layer="runtime", node="fast", hlc_at=1500, **ahead),
        span(
            "POST /chat",
            1010,
            1100,
            span_id="slow",
            parent="fast",
            layer="http",
            node="slow",
            hlc_at=(1500, 1),
            kind="server",
            **ahead,
        ),
    ]

    # OpenInference only: session.id, span kinds, tool.name; no turn id, no HLC
    oi = dict(session=None, turn=None, trace="openinference")
    rows += [
        span(
            "agent run",
            0,
            900,
            span_id="agent",
            node="oi-app",
            **oi,
            attrs={c.SESSION_ID: "s-oi", c.OPENINFERENCE_SPAN_KIND: "AGENT"},
        ),
        span(
            "search_web",
            100,
            400,
            span_id="tool",
            parent="agent",
            node="oi-app",
            **oi,
            attrs={c.OPENINFERENCE_SPAN_KIND: "TOOL", c.OPENINFERENCE_TOOL_NAME: "search_web"},
        ),
    ]
    # GenAI conventions only: conversation id; an inner span carries a framework's own run id (outermost wins)
    genai = dict(session=None, turn=None, trace="genai")
    rows += [
        span(
            "invoke_agent support",
            0,
            800,
            span_id="agent",
            node="genai-app",
            **genai,
            attrs={c.GEN_AI_CONVERSATION_ID: "conv-1", c.GEN_AI_OPERATION_NAME: "invoke_agent"},
        ),
        span(
            "execute_tool lookup_order",
            200,
            700,
            span_id="tool",
            parent="agent",
            node="genai-app",
            **genai,
            attrs={
                c.GEN_AI_CONVERSATION_ID: "framework-run-77",
                c.GEN_AI_OPERATION_NAME: "execute_tool",
                c.TOOL_NAME: "lookup_order",
                c.TOOL_CALL_ID: "call_x",
            },
        ),
    ]

    # over every budget: a 31 s turn, a 6 s tool call, a 300 ms gap between stream segments
    slow = dict(session="s-slow", turn="slow", trace="slow")
    rows += [
        span(
            "POST /chat", 0, 31_000, span_id="root", layer="http", node="gw", hlc_at=0, kind="server", **slow
        ),
        span(
            "stream",
            10,
            30_000,
            span_id="stream",
            parent="root",
            layer="stream",
            node="streamer",
            hlc_at=10,
            **slow,
            events=[
                event(c.EV_STREAM_PROGRESS, t, hlc_at=t, **{c.STREAM_TOKENS: i})
                for i, t in enumerate((100, 250, 550, 700), start=1)
            ],
        ),
        span(
            "execute_tool search_web",
            1000,
            7000,
            span_id="tool",
            parent="root",
            layer="tool",
            node="tools",
            hlc_at=1000,
            **slow,
            attrs={c.TOOL_NAME: "search_web", c.TOOL_CALL_ID: "c-slow"},
            events=[event(c.EV_PARTIAL_STORED, 6900, hlc_at=6900)],
        ),
    ]

    # one span exported twice (an OTLP retry): counted once
    retried = dict(session="s-retry", turn="retry", trace="retry")
    first = span(
        "POST /chat", 0, 100, span_id="root", layer="http", node="gw", hlc_at=0, kind="server", **retried
    )
    rows += [first, {**first, "received_unix_nano": first["received_unix_nano"] + 5_000_000}]
    return rows


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory, builders: Any) -> Iterator[duckdb.DuckDBPyConnection]:
    store = builders.write_store(tmp_path_factory.mktemp("views"), _rows(builders), registry_toml=REGISTRY)
    connection = catalog.connect(store)
    yield connection
    connection.close()


def rows(con: duckdb.DuckDBPyConnection, sql: str, *params: Any) -> list[dict]:
    cursor = con.execute(sql, list(params))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]


def one(con: duckdb.DuckDBPyConnection, sql: str, *params: Any) -> dict:
    [row] = rows(con, sql, *params)
    return row


# --- turns -----------------------------------------------------------------------------------------
def test_a_completed_turn(con: duckdb.DuckDBPyConnection, builders: Any) -> None:
    t = one(con, "select * from turns where turn_id = 'clean'")
    assert (t["session_id"], t["status"], t["cancel_origin"], t["ordering"]) == (
        "s-clean",
        "completed",
        None,
        "hlc",
    )
    assert (t["tokens_streamed"], t["tool_calls"], t["side_effects"], t["findings"]) == (50, 1, 1, 0)
    assert (t["spans"], t["open_spans"], t["traces"]) == (6, 0, 1)
    assert t["started_wall_ns"] == builders.ns(0) and t["ended_wall_ns"] == builders.ns(3000)
    assert t["started_hlc"] == builders.hlc(0) and t["duration_ms"] == 3000
    assert t["layers"] == ["billing", "http", "runtime", "stream", "third_party", "tool"]


def test_a_cancelled_turn(con: duckdb.DuckDBPyConnection) -> None:
    t = one(
        con, "select status, cancel_origin, tool_calls, side_effects from turns where turn_id = 'cancelled'"
    )
    assert t == {"status": "cancelled", "cancel_origin": "user_clicked", "tool_calls": 1, "side_effects": 0}


def test_a_turn_whose_spans_never_ended_is_open_not_dropped(con: duckdb.DuckDBPyConnection) -> None:
    t = one(
        con,
        "select status, ended_wall_ns, ended_hlc, duration_ms, open_spans from turns where turn_id = 'open'",
    )
    assert t == {
        "status": "open",
        "ended_wall_ns": None,
        "ended_hlc": None,
        "duration_ms": None,
        "open_spans": 2,
    }
    call = one(con, "select status, tool_span_ms, open_tool_spans from side_effects where turn_id = 'open'")
    assert call == {"status": "running", "tool_span_ms": None, "open_tool_spans": 1}
    assert (
        one(con, "select verdict from layer_verdicts where turn_id = 'open' and layer = 'http'")["verdict"]
        == "open"
    )


def test_a_cancel_from_a_linked_trace_belongs_to_the_turn(con: duckdb.DuckDBPyConnection) -> None:
    t = one(con, "select session_id, status, cancel_origin, traces from turns where turn_id = 'linked'")
    assert t == {"session_id": "s-linked", "status": "cancelled", "cancel_origin": "user_typed", "traces": 2}
    ack = one(con, "select cancel_to_ack_ms, http_ack_ms from cancel_acks where turn_id = 'linked'")
    assert ack == {"cancel_to_ack_ms": 10, "http_ack_ms": 10}


def test_a_duplicated_export_counts_once(con: duckdb.DuckDBPyConnection) -> None:
    assert one(con, "select spans from turns where turn_id = 'retry'") == {"spans": 1}


# --- frameworks without the turnlens contract --------------------------------------------------------
def test_openinference_spans_become_a_wall_clock_turn_with_a_tool_call(
    con: duckdb.DuckDBPyConnection, builders: Any
) -> None:
    trace = builders.span("x", 0, 1, trace="openinference")["trace_id"]
    t = one(con, "select * from turns where session_id = 's-oi'")
    assert (t["turn_id"], t["ordering"], t["status"], t["tool_calls"], t["findings"]) == (
        trace,
        "wall_clock",
        "completed",
        1,
        0,
    )
    call = one(con, "select * from side_effects where session_id = 's-oi'")
    assert (call["tool_name"], call["tier"], call["tier_source"], call["ordering"]) == (
        "search_web",
        "read_only",
        "registry",
        "wall_clock",
    )
    assert call["tool_call_id"] == builders.span("x", 0, 1, span_id="tool")["span_id"]
    assert call["dispatched_hlc"] == builders.ns(100) // 1_000_000 << 16


def test_genai_spans_take_the_outermost_conversation_and_flag_only_the_missing_tier(
    con: duckdb.DuckDBPyConnection,
) -> None:
    t = one(con, "select session_id, ordering, tool_calls from turns where session_id = 'conv-1'")
    assert t == {"session_id": "conv-1", "ordering": "wall_clock", "tool_calls": 1}
    assert rows(con, "select count(*) as n from turns where session_id = 'framework-run-77'") == [{"n": 0}]
    found = rows(con, "select kind, tool_call_id from divergences where session_id = 'conv-1'")
    assert found == [{"kind": "untiered_tool", "tool_call_id": "call_x"}]


# --- turn_timeline -----------------------------------------------------------------------------------
def test_the_timeline_follows_the_hlc_within_a_millisecond(con: duckdb.DuckDBPyConnection) -> None:
    events = rows(
        con,
        "select seq, wall_seq, name, hlc_logical, offset_ms from turn_timeline "
        "where turn_id = 'same_ms' and source = 'event' order by seq",
    )
    assert [(e["name"], e["hlc_logical"], e["offset_ms"]) for e in events] == [
        ("turn.user_input", 1, 500),
        ("stream.progress", 2, 500),
    ]
    assert events[0]["seq"] < events[1]["seq"] and events[0]["wall_seq"] > events[1]["wall_seq"]
    assert rows(con, "select kind from divergences where turn_id = 'same_ms'") == []


def test_the_timeline_numbers_every_start_end_and_event(con: duckdb.DuckDBPyConnection) -> None:
    timeline = rows(
        con,
        "select seq, source, step, layer, node, hlc_source from turn_timeline "
        "where turn_id = 'cancelled' order by seq",
    )
    assert [t["seq"] for t in timeline] == list(range(1, len(timeline) + 1))
    steps = [t["step"] for t in timeline if t["step"]]
    assert (
        steps.index("cancel.requested") < steps.index("cancel.received") < steps.index("cancel.acknowledged")
    )
    assert steps.index("cancel.acknowledged") < steps.index("tool.discarded")
    assert {t["hlc_source"] for t in timeline if t["source"] == "span_end"} == {"span_clock"}
    assert timeline[0]["source"] == "span_start" and timeline[0]["layer"] == "http"


# --- cancel_acks / layer_verdicts ---------------------------------------------------------------------
def test_cancel_acks_measure_each_layer(con: duckdb.DuckDBPyConnection, builders: Any) -> None:
    ack = one(con, "select * from cancel_acks where turn_id = 'cancelled'")
    assert (ack["origin"], ack["requested_layer"], ack["requested_hlc"]) == (
        "user_clicked",
        "http",
        builders.hlc(1000),
    )
    # acknowledgements at +20 (http), +21 (stream), +22 (runtime); no call ran, so the tool layer had none
    assert (
        ack["cancel_to_ack_ms"],
        ack["http_ack_ms"],
        ack["stream_ack_ms"],
        ack["runtime_ack_ms"],
        ack["tool_ack_ms"],
    ) == (22, 20, 21, 22, None)
    assert ack["layers_reached"] == ["http", "runtime", "stream"]
    assert ack["layers_acked"] == ["http", "runtime", "stream"]
    assert rows(con, "select turn_id from cancel_acks where turn_id = 'clean'") == []


def test_layer_verdicts_read_side_by_side(con: duckdb.DuckDBPyConnection) -> None:
    clean = {
        r["layer"]: r["verdict"] for r in rows(con, "select * from layer_verdicts where turn_id = 'clean'")
    }
    assert clean == {
        "http": "completed",
        "stream": "completed",
        "runtime": "completed",
        "tool": "succeeded",
        "third_party": "acknowledged",
        "billing": "charged",
    }
    cancelled = {r["layer"]: r for r in rows(con, "select * from layer_verdicts where turn_id = 'cancelled'")}
    assert (
        cancelled["stream"]["verdict"] == "cancelled" and cancelled["stream"]["finish_reason"] == "cancelled"
    )
    assert (
        cancelled["runtime"]["cancel_acknowledged"]
        and "Acknowledged the cancel" in cancelled["runtime"]["detail"]
    )


# --- side_effects -------------------------------------------------------------------------------------
def test_the_ledger_has_every_phase(con: duckdb.DuckDBPyConnection, builders: Any) -> None:
    call = one(con, "select * from side_effects where turn_id = 'clean'")
    hlc = builders.hlc
    assert (call["tool_call_id"], call["tool_name"], call["tier"], call["dispatch"], call["status"]) == (
        "call1",
        "send_invoice",
        "soft_irreversible",
        "speculative",
        "committed",
    )
    assert (call["buffered_hlc"], call["dispatched_hlc"], call["prepared_hlc"], call["committed_hlc"]) == (
        hlc(400),
        hlc(2100),
        hlc(2120),
        hlc(2200),
    )
    assert (call["approval_requested_hlc"], call["approval_granted_hlc"]) == (hlc(2050), hlc(2080))
    assert (
        call["third_party_acks"],
        call["third_party_status"],
        call["charges"],
        call["charged_amount"],
    ) == (1, "250 OK", 1, 0.5)
    assert call["idempotency_key"] == "k-clean" and call["requires_approval"] and call["side_effecting"]
    discarded = one(con, "select status, discarded_hlc from side_effects where turn_id = 'cancelled'")
    assert discarded == {"status": "discarded", "discarded_hlc": hlc(1025)}


# --- node_skew -----------------------------------------------------------------------------------------
def test_a_node_far_ahead_shows_as_skew_on_the_nodes_it_talks_to(con: duckdb.DuckDBPyConnection) -> None:
    skew = {r["node"]: r for r in rows(con, "select * from node_skew where node in ('fast', 'slow')")}
    assert skew["slow"]["max_skew_ms"] == 490 and skew["slow"]["over_tolerance"] and skew["slow"]["anomaly"]
    assert skew["fast"]["max_skew_ms"] == 0 and not skew["fast"]["over_tolerance"]
    assert skew["slow"]["tolerance_ms"] == 100


# --- budget_breaches -------------------------------------------------------------------------------------
def test_budgets(con: duckdb.DuckDBPyConnection) -> None:
    breaches = rows(
        con, "select budget, tool_name, observed_ms, budget_ms from budget_breaches order by budget"
    )
    assert breaches == [
        {"budget": "segment_gap", "tool_name": None, "observed_ms": 300, "budget_ms": 200},
        {"budget": "tool_call", "tool_name": "search_web", "observed_ms": 6000, "budget_ms": 5000},
        {"budget": "turn", "tool_name": None, "observed_ms": 31000, "budget_ms": 30000},
    ]


# --- partial_store_rate / turn_usage ----------------------------------------------------------------
def test_partial_store_rate(con: duckdb.DuckDBPyConnection) -> None:
    per_tool = {r["tool_name"]: r for r in rows(con, "select * from partial_store_rate")}
    assert (per_tool["search_web"]["tool_calls"], per_tool["search_web"]["partial_stored"]) == (3, 1)
    everything = per_tool[None]
    assert everything["partial_stored"] == 1 and everything["rate"] == pytest.approx(
        1 / everything["tool_calls"]
    )
    assert everything["target"] == 0.05


def test_usage_is_never_a_silent_zero(con: duckdb.DuckDBPyConnection) -> None:
    usage = {r["turn_id"]: r for r in rows(con, "select * from turn_usage")}
    assert (usage["clean"]["usage"], usage["clean"]["tokens_billed"], usage["clean"]["total_cost"]) == (
        "known",
        50,
        pytest.approx(0.51),
    )
    assert (usage["slow"]["usage"], usage["slow"]["tokens_streamed"], usage["slow"]["tokens_billed"]) == (
        "partial",
        4,
        None,
    )
    assert (usage["open"]["usage"], usage["open"]["tokens_streamed"], usage["open"]["total_cost"]) == (
        "unknown",
        None,
        None,
    )
    assert usage["cancelled"]["cancelled"] and usage["cancelled"]["tokens_streamed_before_cancel"] == 50


# --- tool_registry / tool_audit ---------------------------------------------------------------------
def test_the_registry_with_what_was_observed(con: duckdb.DuckDBPyConnection) -> None:
    registry = {r["tool_name"]: r for r in rows(con, "select * from tool_registry")}
    assert set(registry) == {"send_invoice", "search_web", "never_called"}
    assert registry["never_called"]["calls"] == 0 and registry["never_called"]["owner"] == "search-team"
    assert registry["search_web"]["calls"] == 3


def test_the_audit_compares_registry_and_spans(con: duckdb.DuckDBPyConnection) -> None:
    audit = {r["tool_name"]: r for r in rows(con, "select * from tool_audit")}
    assert audit["send_invoice"]["verdict"] == "mismatch" and audit["send_invoice"]["dispatch_mismatch"]
    assert audit["send_invoice"]["observed_dispatch"] == ["speculative"]
    assert audit["never_called"]["verdict"] == "unused"
    assert audit["lookup_order"]["verdict"] == "untiered" and not audit["lookup_order"]["registered"]
    assert audit["search_web"]["verdict"] == "ok" and audit["search_web"]["calls_without_tier"] == 2


# Each turn query of queries/turn/ (run by the Turn detail page, the export and `turnlens query NAME_of_turn`)
# beside the view it scopes: the same rows, in the same order, for every turn.
TURN_QUERIES_OVER_VIEWS = {
    "timeline": "select * from turn_timeline where session_id = $s and turn_id = $t order by seq",
    "findings": "select * from divergences where session_id = $s and turn_id = $t "
    "order by detected_hlc, kind, tool_call_id",
    "side_effects": """
select
    *,
    committed_hlc is not null and committed_hlc > (
        select min(order_hlc) from turn_events
        where session_id = $s and turn_id = $t and step = 'cancel.requested'
    ) as committed_after_stop,
    receipt_hlc is not null as receipt_shown,
    compensated_hlc is not null as undone,
    compensation_failed_hlc is not null as undo_failed,
    discarded_hlc is not null as discarded,
    approval_granted_hlc is not null as approved
from side_effects
where session_id = $s and turn_id = $t
order by coalesce(dispatched_hlc, buffered_hlc, prepared_hlc, committed_hlc), started_ns, tool_call_id
""",
    "verdicts": "select * from layer_verdicts where session_id = $s and turn_id = $t order by "
    "coalesce(list_position(['http', 'stream', 'runtime', 'tool', 'third_party', 'billing'], layer), 99)",
    "cancel_acks": "select * from cancel_acks where session_id = $s and turn_id = $t",
    "usage": "select * from turn_usage where session_id = $s and turn_id = $t",
    "summary": "select * from turns where session_id = $s and turn_id = $t",
    "skew": """
select
    node,
    string_agg(distinct layer, ', ' order by layer) as layer,
    count(*) as events,
    max(abs(skew_ms)) as max_skew_ms,
    quantile_cont(abs(skew_ms), 0.95) as p95_skew_ms,
    min(skew_ms) as min_skew_ms,
    any_value(s.skew_tolerance_ms) as tolerance_ms,
    case
        when max(abs(skew_ms)) > any_value(s.skew_anomaly_ms) then 'anomaly'
        when max(abs(skew_ms)) > any_value(s.skew_tolerance_ms) then 'beyond tolerance'
        else 'within tolerance'
    end as note
from turn_events, settings as s
where session_id = $s and turn_id = $t and skew_ms is not null
group by node
order by max_skew_ms desc, node
""",
    "tokens": """
with stop as (
    select min(order_hlc) as stop_hlc
    from turn_events
    where session_id = $s and turn_id = $t and step = 'cancel.requested'
)

select
    $s as session_id,
    $t as turn_id,
    max(e.stream_tokens) filter (where s.stop_hlc is null or e.order_hlc <= s.stop_hlc) as tokens_before_stop,
    max(e.stream_tokens) as tokens_streamed,
    sum(e.billing_tokens) filter (where e.billing_kind = 'tokens') as tokens_billed,
    count(*) filter (where e.step = 'transcript.receipt') as receipts_shown,
    any_value(s.stop_hlc) as stop_hlc
from turn_events as e
cross join stop as s
where e.session_id = $s and e.turn_id = $t
""",
    "spans": """
select
    span_id, parent_span_id, trace_id, name, kind, layer, node, service_name, status_code, status_message,
    start_time_unix_nano, end_time_unix_nano, duration_ms, hlc, attributes, resource_attributes,
    [
        {'name': e.name, 'time_unix_nano': e.time_unix_nano, 'hlc': e.hlc, 'attributes': e.attributes}
        for e in events
    ] as events
from spans
where session_id = $s and turn_id = $t
order by start_time_unix_nano, span_id
""",
    "span_events": """
select
    session_id, turn_id, coalesce(hlc, span_hlc) as hlc, wall_ns, layer, node, name, span_name, trace_id,
    span_id,
    attributes
from span_events
where session_id = $s and turn_id = $t
order by coalesce(hlc, span_hlc), wall_ns, span_id, event_index
""",
}


def test_every_turn_query_is_checked_against_its_view() -> None:
    assert set(TURN_QUERIES_OVER_VIEWS) == set(turn_queries.load())


@pytest.fixture(scope="module")
def held_turns(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], dict[str, Any]]:
    """Every turn of the fixture held alone, as the Turn detail page holds it, with every turn query's
    (columns, rows): one hold per turn, shared by the comparisons below."""
    turns = con.execute("select session_id, turn_id from turns order by all").fetchall()
    assert ("s-linked", "linked") in turns
    fetch = lambda cursor: ([d[0] for d in cursor.description], cursor.fetchall())  # noqa: E731
    names = sorted(turn_queries.load())
    return {(s, t): turn_queries.run_all(con.cursor(), [s], [t], names, fetch) for s, t in turns}


@pytest.mark.parametrize("name", sorted(TURN_QUERIES_OVER_VIEWS))
def test_each_turn_query_gives_the_view_rows_for_every_turn(
    con: duckdb.DuckDBPyConnection, held_turns: dict[tuple[str, str], dict[str, Any]], name: str
) -> None:
    """The turn queries read the turn's traces only; no turn may lose or gain a row against the view, and
    linked cancels and retries must not fall out."""
    nonempty = 0
    for (session, turn), answers in held_turns.items():
        view = con.execute(TURN_QUERIES_OVER_VIEWS[name], {"s": session, "t": turn})
        columns = [d[0] for d in view.description]
        expected = view.fetchall()
        assert answers[name] == (columns, expected), (name, session, turn)
        # tokens has a row for every turn: it proves something where the turn streamed or billed
        nonempty += any(expected[0][2:4]) if name == "tokens" else bool(expected)
    assert nonempty > 0, f"{name}: no turn of the fixture has rows, so the comparison proves nothing"


def test_a_turn_query_by_name_answers_as_the_held_turn(
    con: duckdb.DuckDBPyConnection, held_turns: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """`turnlens query NAME_of_turn` holds the turn itself: the same rows as the page's hold, also when the
    connection held other turns before (what those holds computed once for several queries is not reused)."""
    for session, turn in [("s-linked", "linked"), *list(held_turns)[:2]]:
        for name in ("timeline", "side_effects", "findings", "summary"):
            named = catalog.run_named(con, f"{name}_of_turn", {"session": session, "turn": turn})
            assert ([d[0] for d in named.description], named.fetchall()) == held_turns[(session, turn)][name]


def test_one_turn_queries_see_the_idempotency_keys_other_turns_share(kit: Any) -> None:
    """A charge, a commit and an acknowledgement of the same key in other turns' traces (no link between
    them) change a turn's findings; the turn queries must find those traces, or differ from the view."""
    second_ack = kit.event(
        c.EV_THIRD_PARTY_ACK, 2700, hlc_at=2700, **{c.IDEMPOTENCY_KEY: "kx", c.THIRD_PARTY_STATUS: "250 OK"}
    )
    con = kit.store(
        kit.turn(turn="ta", trace="ta", key="kx", charged=False)  # committed and acked; charged only in tb
        + kit.turn(turn="tb", trace="tb", key="kx", outcome="failed", acks=())  # charged, never committed
        + kit.turn(turn="tc", trace="tc", key="ky", charged=False)
        + [kit.span("vendor", 2690, 2710, trace="td", turn="td", layer="third_party", events=[second_ack])]
    )
    found = con.execute("select turn_id, kind from divergences").fetchall()
    kinds = {turn: {k for t, k in found if t == turn} for turn in ("ta", "tb", "tc", "td")}
    assert "unbilled_side_effect" not in kinds["ta"] and "unbilled_side_effect" in kinds["tc"]
    assert "duplicate_commit" in kinds["ta"] and "billed_not_committed" not in kinds["tb"]
    for name in ("findings", "side_effects", "summary", "usage"):
        for turn in ("ta", "tb", "tc", "td"):
            expected = con.execute(TURN_QUERIES_OVER_VIEWS[name], {"s": "s1", "t": turn}).fetchall()
            got = catalog.run_named(con, f"{name}_of_turn", {"session": "s1", "turn": turn}).fetchall()
            assert got == expected, (name, turn)


def test_several_turns_held_at_once_answer_as_each_alone(con: duckdb.DuckDBPyConnection) -> None:
    """The export holds an incident's turns together: each turn's rows are those it has alone."""
    turns = con.execute("select session_id, turn_id from turns order by all").fetchall()
    sessions, ids = [s for s, _ in turns], [t for _, t in turns]
    turn_queries.hold(con, sessions, ids)
    together = turn_queries.run(con, "findings").fetchall()
    alone = []
    for session, turn in turns:
        alone += catalog.run_named(con, "findings_of_turn", {"session": session, "turn": turn}).fetchall()
    assert together and sorted(together, key=repr) == sorted(alone, key=repr)


# --- what a framework's own spans say after stop (docs/frameworks.md) ----------------------------------
def _framework_turn(
    kit: Any, trace: str, *, last_chat_finish: list[str] | None, tool: str = "send_email"
) -> list:
    """A GenAI-only turn: a run, a chat that asks for a tool, the tool run (no call id), a last chat."""
    f = dict(session=None, turn=None, trace=trace, node="app")
    run = {c.GEN_AI_OPERATION_NAME: "invoke_agent", c.GEN_AI_CONVERSATION_ID: f"s-{trace}"}
    asks = {
        c.GEN_AI_OPERATION_NAME: "chat",
        c.FINISH_REASONS: ["tool_calls"],
        "gen_ai.usage.input_tokens": 20,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "tool_call", "id": f"call-{trace}", "name": tool}]}]
        ),
    }
    last = {c.GEN_AI_OPERATION_NAME: "chat", "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 9}
    if last_chat_finish is not None:
        last[c.FINISH_REASONS] = last_chat_finish
    return [
        kit.span("invoke_agent a", 0, 1000, span_id="run", **f, attrs=run),
        kit.span("chat m", 10, 200, span_id="chat1", parent="run", **f, attrs=asks),
        kit.span(
            f"{tool}.tool",
            210,
            300,
            span_id="tool",
            parent="run",
            **f,
            attrs={"traceloop.span.kind": "tool", c.TOOL_NAME: tool},
        ),
        kit.span("chat m", 310, 900, span_id="chat2", parent="run", **f, attrs=last),
    ]


def test_a_stream_cut_short_is_an_inferred_cancel_with_unknown_ack(kit: Any) -> None:
    con = kit.store(
        _framework_turn(kit, "cut", last_chat_finish=None)
        + _framework_turn(kit, "ok", last_chat_finish=["stop"])
    )
    statuses = dict(con.execute("select session_id, status from turns").fetchall())
    assert statuses == {"s-cut": "cancelled", "s-ok": "completed"}
    assert con.execute(
        "select origin, cancel_to_ack_ms, requested_hlc >> 16 from cancel_acks"
    ).fetchall() == [("inferred.no_finish_reason", None, kit.ns(900) // 1_000_000)]
    usage = dict(con.execute("select session_id, usage from turn_usage").fetchall())
    assert usage == {
        "s-cut": "partial",
        "s-ok": "known",
    }  # the cut-short call reported tokens, the turn stopped
    kinds = con.execute("select distinct kind from divergences").fetchall()
    assert ("cancel_not_propagated",) not in kinds  # what an inferred cancel reached is unknown, not missing


def test_adk_model_calls_are_not_agent_runs(kit: Any) -> None:
    """ADK's spans of one invocation: a workflow root, its agent, and model calls carrying the invocation's id
    (`gcp.vertex.agent.invocation_id`). A model call has no child span; read as an agent run it would be a run
    whose model call never ended, and every ADK turn a cancelled one."""
    f = dict(session=None, turn=None, trace="adk", node="app")
    conversation = {c.GEN_AI_CONVERSATION_ID: "s-adk"}
    model = {
        **conversation,
        c.GEN_AI_OPERATION_NAME: "generate_content",
        "gcp.vertex.agent.invocation_id": "e-1",
        c.FINISH_REASONS: ["stop"],
        "gen_ai.usage.input_tokens": 20,
        "gen_ai.usage.output_tokens": 10,
    }
    tool = {c.GEN_AI_OPERATION_NAME: "execute_tool", c.TOOL_NAME: "send_email", c.TOOL_CALL_ID: "call-1"}
    con = kit.store([
        kit.span("invoke_workflow assistant", 0, 1000, span_id="workflow", **f,
                 attrs={**conversation, c.GEN_AI_OPERATION_NAME: "invoke_workflow"}),
        kit.span("invoke_agent assistant", 5, 990, span_id="agent", parent="workflow", **f,
                 attrs={**conversation, c.GEN_AI_OPERATION_NAME: "invoke_agent"}),
        kit.span("generate_content m", 10, 200, span_id="ask", parent="agent", **f, attrs=model),
        kit.span("execute_tool send_email", 210, 300, span_id="tool", parent="agent", **f, attrs=tool),
        kit.span("generate_content m", 310, 900, span_id="answer", parent="agent", **f, attrs=model),
    ], registry_toml='[tools.send_email]\ntier = "soft_irreversible"\n')
    assert con.execute("select session_id, status, layers from turns").fetchall() == [
        ("s-adk", "completed", ["runtime", "tool"])
    ]
    assert con.execute("select count(*) from cancel_acks").fetchall() == [(0,)]
    assert con.execute("select kind from divergences").fetchall() == [("missing_idempotency_key",)]


REGISTRY_TWO_TOOLS = """\
[tools.get_weather]
tier = "read_only"
[tools.send_email]
tier = "soft_irreversible"
"""


def test_adks_span_around_parallel_calls_is_no_call_of_its_own(kit: Any) -> None:
    """ADK runs the tool calls a model asked for at once in parallel, each in its own execute_tool span, then
    records the batch in one more: `execute_tool (merged)`, tool '(merged tools)', the batch's event id as its
    call id. Taken for a call, it was a third row of the ledger and an untiered tool nobody has."""
    f = dict(session=None, turn=None, trace="par", node="app")
    run = {c.GEN_AI_CONVERSATION_ID: "s-par", c.GEN_AI_OPERATION_NAME: "invoke_agent"}
    model = {
        c.GEN_AI_CONVERSATION_ID: "s-par",
        c.GEN_AI_OPERATION_NAME: "generate_content",
        c.FINISH_REASONS: ["stop"],
    }

    def tool(name: str, call_id: str) -> dict:
        return {c.GEN_AI_OPERATION_NAME: "execute_tool", c.TOOL_NAME: name, c.TOOL_CALL_ID: call_id}

    con = kit.store([
        kit.span("invoke_agent assistant", 0, 1000, span_id="agent", **f, attrs=run),
        kit.span("generate_content m", 10, 200, span_id="ask", parent="agent", **f, attrs=model),
        kit.span("execute_tool get_weather", 210, 300, span_id="t1", parent="agent", **f,
                 attrs=tool("get_weather", "call-w")),
        kit.span("execute_tool send_email", 210, 320, span_id="t2", parent="agent", **f,
                 attrs=tool("send_email", "call-e")),
        kit.span("execute_tool (merged)", 330, 331, span_id="batch", parent="agent", **f,
                 attrs=tool("(merged tools)", "3658098b-event")),
        kit.span("generate_content m", 340, 900, span_id="answer", parent="agent", **f, attrs=model),
    ], registry_toml=REGISTRY_TWO_TOOLS)
    assert con.execute("select tool_name, tool_call_id, status from side_effects order by 1").fetchall() == [
        ("get_weather", "call-w", "succeeded"),
        ("send_email", "call-e", "committed"),
    ]
    assert con.execute("select status, tool_calls from turns").fetchall() == [("completed", 2)]
    assert con.execute("select kind from divergences").fetchall() == [("missing_idempotency_key",)]


@pytest.mark.parametrize("status", ["error", "unset"])
def test_a_framework_tool_the_stop_interrupted_is_neither_failed_nor_committed(kit: Any, status: str) -> None:
    """The user stops while a framework runs send_email: the task awaiting it is cancelled and the tool span
    ends with the CancelledError (pydantic-ai, Logfire), while the work it started (a thread, a request sent)
    may still complete. The spans cannot say whether the e-mail went out: the call is `interrupted`, and the
    tool layer acknowledged the cancel. Before, it read as failed (status error: nothing happened) or, with
    the status unset, as committed at the span's end."""
    f = dict(session=None, turn=None, trace="int", node="app")
    cancelled = {"exception.type": "asyncio.exceptions.CancelledError"}
    run = {c.GEN_AI_OPERATION_NAME: "invoke_agent", c.GEN_AI_CONVERSATION_ID: "s-int"}
    asks = {c.GEN_AI_OPERATION_NAME: "chat", c.FINISH_REASONS: ["tool_calls"]}
    tool = {c.GEN_AI_OPERATION_NAME: "execute_tool", c.TOOL_NAME: "send_email", c.TOOL_CALL_ID: "call-1"}
    rows = [
        kit.span("invoke_agent a", 0, 1010, span_id="run", **f, attrs=run, status="error",
                 events=[kit.event("exception", 1005, **cancelled)]),
        kit.span("chat m", 10, 200, span_id="chat1", parent="run", **f, attrs=asks),
        kit.span("execute_tool send_email", 210, 1000, span_id="tool", parent="run", **f, attrs=tool,
                 status=status, events=[kit.event("exception", 1000, **cancelled)]),
    ]
    registry = '[tools.send_email]\ntier = "soft_irreversible"\n'
    con = kit.store(rows, registry_toml=registry)
    assert con.execute(
        "select tool_call_id, status, tool_cancelled, commit_inferred, committed_hlc from side_effects"
    ).fetchall() == [("call-1", "interrupted", True, False, None)]
    turn = con.execute("select status, cancel_origin from turns").fetchall()
    assert turn == [("cancelled", "inferred.exception")]
    # the tool layer was stopped, whatever status the span's CancelledError left: it did not fail
    verdict = con.execute("select verdict from layer_verdicts where layer = 'tool'").fetchall()
    assert verdict == [("cancelled",)]
    # whether the e-mail went out is the question left to a person: a finding says so, with the call
    [(kind, severity, call, detected_ms, evidence)] = con.execute(
        "select kind, severity, tool_call_id, detected_hlc >> 16, evidence from divergences"
    ).fetchall()
    assert (kind, severity, call) == ("interrupted_side_effect", "high", "call-1")
    assert detected_ms == kit.ns(1000) // 1_000_000  # the tool's CancelledError: the first sign of the stop
    assert "send_email (soft_irreversible)" in evidence and "inferred.exception" in evidence
    assert "unknown" in evidence
    # the mail relay acknowledges the call after all: the tool layer reported it cancelled
    ack = kit.event(c.EV_THIRD_PARTY_ACK, 1500, **{c.TOOL_CALL_ID: "call-1", c.THIRD_PARTY_STATUS: "250 OK"})
    relay = kit.span("POST relay", 1490, 1510, span_id="relay", parent="tool", **f, kind="client",
                     attrs={"server.address": "relay"}, events=[ack])
    acked = kit.store([*rows, relay], registry_toml=registry)
    assert acked.execute("select kind from divergences").fetchall() == [("ghost_commit",)]


@pytest.mark.parametrize(
    ("tier", "finding"),
    [("hard_irreversible", ("interrupted_side_effect", "high")),
     ("button_reversible", ("interrupted_side_effect", "medium")),
     ("read_only", None)],
)
def test_an_interrupted_call_is_a_finding_when_it_could_change_the_world(
    kit: Any, tier: str, finding: tuple | None
) -> None:
    """A stopped framework call of a side-effecting tier may have acted: an interrupted_side_effect, high,
    medium when a button undoes it. A read-only one changed nothing, whatever became of it: no finding. The
    evidence names the idempotency key the third party can be asked by."""
    f = dict(session=None, turn=None, trace="tier", node="app")
    cancelled = {"exception.type": "CancelledError"}
    tool = {c.GEN_AI_OPERATION_NAME: "execute_tool", c.TOOL_NAME: "act", c.TOOL_CALL_ID: "call-t",
            c.IDEMPOTENCY_KEY: "key-t"}
    con = kit.store([
        kit.span("invoke_agent a", 0, 600, span_id="run", **f, status="error",
                 attrs={c.GEN_AI_OPERATION_NAME: "invoke_agent", c.GEN_AI_CONVERSATION_ID: "s-tier"},
                 events=[kit.event("exception", 590, **cancelled)]),
        kit.span("chat m", 10, 200, span_id="chat", parent="run", **f,
                 attrs={c.GEN_AI_OPERATION_NAME: "chat", c.FINISH_REASONS: ["tool_calls"]}),
        kit.span("execute_tool act", 210, 580, span_id="tool", parent="run", **f, attrs=tool,
                 events=[kit.event("exception", 580, **cancelled)]),
    ], registry_toml=f'[tools.act]\ntier = "{tier}"\n')
    assert con.execute("select status from side_effects").fetchall() == [("interrupted",)]
    found = con.execute("select kind, severity, idempotency_key, evidence from divergences").fetchall()
    if finding is None:
        assert found == []
    else:
        [(kind, severity, key, evidence)] = found
        assert (kind, severity, key) == (*finding, "key-t")
        assert "idempotency key key-t" in evidence


@pytest.mark.parametrize(
    ("case", "expected_turn", "expected_call"),
    [
        ("stopped", ("cancelled", "inferred.tool_without_result"), ("interrupted", True)),
        ("returned nothing, the model went on", ("completed", None), ("committed", False)),
        ("recorded no content", ("completed", None), ("committed", False)),
        ("failed", ("completed", None), ("failed", False)),
        # what the SDK leaves of a run it paused for a tool that needs approval: asked, not run
        ("paused for approval", ("completed", None), ("awaiting_approval", False)),
        # LangGraph: the tool called interrupt() to ask a person, after work of its own
        ("graph interrupt", ("completed", None), ("awaiting_approval", False)),
    ],
    ids=["stopped", "returned-nothing", "no-content", "failed", "paused", "graph-interrupt"],
)
def test_an_openinference_tool_span_without_its_result_is_a_stop_only_if_nothing_followed(
    kit: Any, case: str, expected_turn: tuple, expected_call: tuple
) -> None:
    """The OpenAI Agents SDK (OpenInference) ends the span of a tool the stop interrupted with an ok status:
    it keeps the call's input.value and never gets its output.value, and no model call follows. A tool that
    returned nothing has no output either, but the model is called again with its result; a span recording
    no content (the SDK's sensitive data off) has neither; a failed tool has an error status; a run the SDK
    pauses for a tool that needs approval ends the tool's span at once (1 ms here), without result;
    LangGraph's interrupt() in a tool leaves its GraphInterrupt on the span. None is a stop."""
    f = dict(session=None, turn=None, trace="oi", node="app")
    session = {"session.id": "s-oi"}
    asks = {
        **session, "openinference.span.kind": "LLM", "output.value": "[]",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call-1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "send_email",
    }
    tool = {**session, "openinference.span.kind": "TOOL", c.TOOL_NAME: "send_email"}
    run = {**session, "openinference.span.kind": "AGENT"}
    interrupt = []
    if case == "graph interrupt":
        interrupt = [kit.event("exception", 989, **{"exception.type": "langgraph.errors.GraphInterrupt"})]
    if case != "recorded no content":
        tool["input.value"] = json.dumps({"to": "ops@example.com"})
    rows = [
        kit.span("assistant", 0, 1000, span_id="run", **f, attrs=run),
        kit.span("generation", 10, 200, span_id="ask", parent="run", **f, attrs=asks),
        kit.span("send_email", 210, 211 if case == "paused for approval" else 990, span_id="tool",
                 parent="run", **f, attrs=tool, events=interrupt,
                 status="error" if case == "failed" else "ok"),
    ]
    if case == "returned nothing, the model went on":
        answer = {**session, "openinference.span.kind": "LLM", "output.value": "Sent."}
        rows.append(kit.span("generation", 991, 999, span_id="answer", parent="run", **f, attrs=answer))
    con = kit.store(rows, registry_toml='[tools.send_email]\ntier = "soft_irreversible"\n')
    assert con.execute("select status, cancel_origin from turns").fetchall() == [expected_turn]
    assert con.execute("select tool_call_id, status, tool_cancelled from side_effects").fetchall() == [
        ("call-1", *expected_call)
    ]
    asked = con.execute("select approval_requested_hlc >> 16 from side_effects").fetchall()
    paused_at = {"paused for approval": kit.ns(211) // 1_000_000, "graph interrupt": kit.ns(990) // 1_000_000}
    assert asked == [(paused_at.get(case),)]
    if case == "stopped":  # the stop is at the tool span's end, which acknowledged it then
        assert con.execute(
            "select origin, cancel_to_ack_ms, requested_hlc >> 16 from cancel_acks"
        ).fetchall() == [("inferred.tool_without_result", 0, kit.ns(990) // 1_000_000)]


def test_adks_placeholder_call_id_is_no_call_and_its_span_a_tool_the_stop_cut_short(kit: Any) -> None:
    """ADK names a tool span's call from the tool's response as the span ends; a tool the stop cut short
    gave none, and ADK writes '<not specified>' with its status unset and no exception. Two such calls in a
    turn are two calls (each named by its span), the turn is cancelled at the first, and each is interrupted.
    A tool that raised has the placeholder too, but an error status: it failed, and is no stop."""
    f = dict(session=None, turn=None, node="app")
    run = {c.GEN_AI_OPERATION_NAME: "invoke_agent", c.GEN_AI_CONVERSATION_ID: "s-adk"}
    model = {c.GEN_AI_OPERATION_NAME: "generate_content", c.FINISH_REASONS: ["stop"]}

    def tool(name: str) -> dict:
        return {c.GEN_AI_OPERATION_NAME: "execute_tool", c.TOOL_NAME: name, c.TOOL_CALL_ID: "<not specified>"}

    con = kit.store([
        kit.span("invoke_agent a", 0, 1000, span_id="run", trace="stop", **f, attrs=run),
        kit.span("generate_content m", 10, 200, span_id="ask", parent="run", trace="stop", **f, attrs=model),
        kit.span("execute_tool send_email", 210, 700, span_id="t1", parent="run", trace="stop", **f,
                 attrs=tool("send_email")),
        kit.span("execute_tool send_email", 210, 212, span_id="t2", parent="run", trace="stop", **f,
                 attrs=tool("send_email")),  # stopped 2 ms in: ADK has no pause that ends a span so
        kit.span("invoke_agent a", 2000, 3000, span_id="run2", trace="raised", **f, attrs=run),
        kit.span("generate_content m", 2010, 2200, span_id="ask2", parent="run2", trace="raised", **f,
                 attrs=model),
        kit.span("execute_tool send_email", 2210, 2700, span_id="t3", parent="run2", trace="raised", **f,
                 attrs=tool("send_email"), status="error"),
        kit.span("generate_content m", 2710, 2900, span_id="answer2", parent="run2", trace="raised", **f,
                 attrs=model),
    ], registry_toml=REGISTRY_TWO_TOOLS)
    assert con.execute("select status, cancel_origin from turns order by started_wall_ns").fetchall() == [
        ("cancelled", "inferred.tool_without_result"), ("completed", None)
    ]
    ledger = con.execute("select tool_call_id, status, tool_cancelled from side_effects order by 1")
    assert ledger.fetchall() == sorted([
        (kit.span_hex("t1"), "interrupted", True),
        (kit.span_hex("t2"), "interrupted", True),
        (kit.span_hex("t3"), "failed", False),
    ])
    found = con.execute("select kind, count(*) from divergences group by kind").fetchall()
    assert found == [("interrupted_side_effect", 2)]


@pytest.mark.parametrize(
    ("case", "tool", "expected"),
    [
        ("asked", "send_email", "awaiting_approval"),  # ADK's confirmation gate answered in the tool's place
        ("took 50 ms", "send_email", "committed"),  # ran, and skipped the model's summary
        ("model after", "send_email", "committed"),
        ("failed", "send_email", "failed"),
        ("not ADK's", "send_email", "committed"),
        ("control tool", "transfer_to_agent", "succeeded"),
    ],
    ids=["asked", "50ms", "model-after", "failed", "not-adk", "control"],
)
def test_an_adk_call_answered_at_once_with_nothing_after_it_asks_for_confirmation(
    kit: Any, case: str, tool: str, expected: str
) -> None:
    """ADK's confirmation gate answers a call that needs confirmation in the tool's place: the tool's span
    lasts a millisecond or two, names the call, and the run ends with no model call after it. That reads as
    a request for confirmation, the call awaiting it. A tool that ran longer, one the model was called after,
    a failed one, another framework's, or ADK's own handoff tool does not."""
    f = dict(session=None, turn=None, trace="conf", node="app")
    run = {c.GEN_AI_OPERATION_NAME: "invoke_agent", c.GEN_AI_CONVERSATION_ID: "s-conf"}
    model = {c.GEN_AI_OPERATION_NAME: "generate_content", c.FINISH_REASONS: ["stop"]}
    span = {c.GEN_AI_OPERATION_NAME: "execute_tool", c.TOOL_NAME: tool, c.TOOL_CALL_ID: "call-c"}
    if case != "not ADK's":
        span["gcp.vertex.agent.event_id"] = "e-1"
    rows = [
        kit.span("invoke_agent a", 0, 1000, span_id="run", **f, attrs=run),
        kit.span("generate_content m", 10, 200, span_id="ask", parent="run", **f, attrs=model),
        kit.span(f"execute_tool {tool}", 210, 260 if case == "took 50 ms" else 212, span_id="tool",
                 parent="run", **f, attrs=span, status="error" if case == "failed" else "unset"),
    ]
    if case == "model after":
        answer = kit.span("generate_content m", 300, 400, span_id="answer", parent="run", **f, attrs=model)
        rows.append(answer)
    con = kit.store(rows, registry_toml=REGISTRY_TWO_TOOLS)
    assert con.execute("select status from side_effects").fetchall() == [(expected,)]
    assert con.execute("select status from turns").fetchall() == [("completed",)]


@pytest.mark.parametrize(
    ("attrs", "status", "expected_turn", "expected_call"),
    [
        ({"traceloop.entity.input": "{}"}, "unset", ("cancelled", "inferred.tool_without_result"),
         "interrupted"),
        ({"traceloop.entity.input": "{}", "traceloop.entity.output": '"sent"'}, "unset", ("completed", None),
         "committed"),
        ({}, "unset", ("completed", None), "committed"),  # content tracing off: the span says nothing
        ({"traceloop.entity.input": "{}"}, "error", ("completed", None), "failed"),
    ],
    ids=["stopped", "answered", "no-content", "failed"],
)
@pytest.mark.parametrize("tool_ms", [780, 2])
def test_a_traceloop_tool_span_without_its_output_is_a_stop(
    kit: Any, attrs: dict, status: str, expected_turn: tuple, expected_call: str, tool_ms: int
) -> None:
    """Traceloop's @tool span of a coroutine the stop cancelled ends with its status unset and no exception,
    with the call's input (traceloop.entity.input) and without its output; however short, since Traceloop has
    no pause for approval (the OpenAI Agents SDK's 10 ms rule is OpenInference's)."""
    f = dict(session=None, turn=None, trace="tl", node="app")
    session = {"traceloop.association.properties.session_id": "s-tl"}
    tool = {**session, "traceloop.span.kind": "tool", c.TOOL_NAME: "send_email", **attrs}
    asks = {**session, c.GEN_AI_OPERATION_NAME: "chat", c.FINISH_REASONS: ["tool_calls"]}
    con = kit.store([
        kit.span("chat_turn.workflow", 0, 1000, span_id="run", **f,
                 attrs={**session, "traceloop.span.kind": "workflow"}),
        kit.span("openai.chat", 10, 200, span_id="ask", parent="run", **f, attrs=asks),
        kit.span("send_email.tool", 210, 210 + tool_ms, span_id="tool", parent="run", **f, attrs=tool,
                 status=status),
    ], registry_toml=REGISTRY_TWO_TOOLS)
    assert con.execute("select status, cancel_origin from turns").fetchall() == [expected_turn]
    assert con.execute("select status from side_effects").fetchall() == [(expected_call,)]


@pytest.mark.parametrize(
    ("final_result", "awaiting"),
    [
        (json.dumps({"calls": [], "approvals": [{"tool_name": "send_email", "tool_call_id": "call-1"}]}),
         [("call-1", "send_email", "awaiting_approval")]),
        ("No approvals were needed.", []),  # a plain answer that says the word
        (json.dumps({"approvals": "all"}), []),  # an output of the user's own shape
        (json.dumps({"approvals": [{"tool_name": "send_email"}]}), []),  # no call to name
        ('{"approvals": [', []),  # cut short
    ],
    ids=["deferred", "text", "not-a-list", "no-call-id", "not-json"],
)
def test_a_pydantic_ai_run_ending_with_deferred_approvals_leaves_its_calls_awaiting(
    kit: Any, final_result: str, awaiting: list
) -> None:
    """pydantic-ai's run that asks for approval (a tool with requires_approval) ends with DeferredToolRequests
    as its final_result, listing the calls; they did not run. Each is an inferred approval.requested and a
    ledger row awaiting approval; nothing else in a final_result reads so."""
    f = dict(session=None, turn=None, trace="def", node="app")
    run = {c.GEN_AI_OPERATION_NAME: "invoke_agent", c.GEN_AI_CONVERSATION_ID: "s-def"}
    run["final_result"] = final_result
    asks = {c.GEN_AI_OPERATION_NAME: "chat", c.FINISH_REASONS: ["tool_call"]}
    con = kit.store([
        kit.span("invoke_agent assistant", 0, 300, span_id="run", **f, attrs=run),
        kit.span("chat m", 10, 200, span_id="chat", parent="run", **f, attrs=asks),
    ], registry_toml='[tools.send_email]\ntier = "soft_irreversible"\nrequires_approval = true\n')
    assert con.execute("select tool_call_id, tool_name, status from side_effects").fetchall() == awaiting
    assert con.execute("select status from turns").fetchall() == [("completed",)]
    assert con.execute("select count(*) from divergences").fetchall() == [(0,)]


def test_a_tool_span_without_call_id_takes_the_id_the_model_requested(kit: Any) -> None:
    con = kit.store(_framework_turn(kit, "ids", last_chat_finish=["stop"]))
    ledger = con.execute(
        "select tool_name, tool_call_id, status, commit_inferred from side_effects"
    ).fetchall()
    assert ledger == [("send_email", "call-ids", "succeeded", False)]  # no registry: no tier, no commit


def test_a_side_effecting_framework_tool_commits_once_registered(kit: Any) -> None:
    rows = _framework_turn(kit, "c1", last_chat_finish=["stop"]) + _framework_turn(
        kit, "c2", last_chat_finish=["stop"]
    )
    untiered = kit.store(rows)
    found = untiered.execute("select kind, evidence from divergences").fetchall()
    assert [k for k, _ in found] == ["untiered_tool"]  # one per tool and day, not one per call
    assert found[0][1].startswith("send_email has no tier") and "tool_registry.toml" in found[0][1]
    registered = kit.store(rows, registry_toml='[tools.send_email]\ntier = "soft_irreversible"\n')
    ledger = registered.execute(
        "select status, commit_inferred, committed_hlc is not null from side_effects"
    ).fetchall()
    assert ledger == [("committed", True, True)] * 2
    kinds = registered.execute("select kind from divergences").fetchall()
    assert kinds == [("missing_idempotency_key",)] * 2


def test_a_calls_claims_answer_the_same_whatever_the_order_of_its_rows(kit: Any) -> None:
    """Two spans of one call claim different tiers and dispatch modes: the claims are listed sorted, so the
    same rows stored in another order, or a turn recomputed by a refresh, give the same row."""
    claims = [("soft_irreversible", "speculative"), ("read_only", "eager")]
    call = {c.TOOL_NAME: "send_invoice", c.TOOL_CALL_ID: "call1"}
    rows = [
        kit.span("tool.execute", 2000 + i, 2100 + i, span_id=f"tool{i}", layer="tool",
                 attrs={**call, c.TOOL_TIER: tier, c.TOOL_DISPATCH: dispatch})
        for i, (tier, dispatch) in enumerate(claims)
    ]
    for order in (rows, rows[::-1]):
        found = kit.store(order).execute("select tiers, dispatches from tool_claims").fetchall()
        assert found == [(["read_only", "soft_irreversible"], ["eager", "speculative"])]


@pytest.mark.parametrize(
    "tool", ["final_answer", "final_result", "transfer_to_agent", "exit_loop", "set_model_response"]
)
def test_a_framework_control_tool_is_never_untiered(kit: Any, tool: str) -> None:
    """smolagents' final_answer, pydantic-ai's final_result, ADK's handoff, loop exit and structured answer:
    tools the framework gives its model to steer its own loop. A tool of the same shape otherwise is one."""
    con = kit.store(
        _framework_turn(kit, "fa", last_chat_finish=["stop"], tool=tool)
        + _framework_turn(kit, "other", last_chat_finish=["stop"], tool=f"{tool}_to_crm")
    )
    found = con.execute("select kind, evidence from divergences").fetchall()
    assert [kind for kind, _ in found] == ["untiered_tool"]
    assert found[0][1].startswith(f"{tool}_to_crm has no tier")
