"""Each detector fires on the turn that breaks its remedy, silent on the one that keeps it.

All scenarios live in one store (one turn each, keys unique per turn) so that a detector matching across
turns by mistake shows up as a finding on the wrong turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import duckdb
import pytest
from turnlens.kernel import findings
from turnlens.queries import catalog

KINDS = list(findings.FINDING_KINDS)

REVERSIBLE_BEFORE_CANCEL = dict(cancel_at=1000, tier="button_reversible", approved_at=850, dispatch_at=900)
READ_ONLY_RUNNING = dict(
    cancel_at=1000,
    tier="read_only",
    requires_approval=False,
    approved_at=None,
    dispatch_at=900,
    commit_at=1500,
)


def _clock_behind(rows: list[dict], hlc: Callable[..., int], ns: Callable[[float], int], wall: float) -> None:
    """The tool node's wall clock runs behind: its span starts at `wall` by it, after the dispatch by HLC."""
    tool = next(r for r in rows if r["name"].startswith("execute_tool"))
    tool["start_time_unix_nano"] = ns(wall)
    tool["hlc"] = hlc(2100, 1)


def _dispatch_clock_ahead(rows: list[dict], hlc: Callable[..., int], ns: Callable[[float], int]) -> None:
    """The tool node's wall clock runs 10 ms ahead: its dispatch, before the cancel by HLC, reads after it."""
    for row in rows:
        for ev in row["events"]:
            if ev["name"] == "tool.dispatched":
                ev["time_unix_nano"] = ns(1010)


def _no_hlc(rows: list[dict], hlc: Callable[..., int], ns: Callable[[float], int]) -> None:
    for row in rows:
        row["hlc"] = None
        row["events"] = [{**e, "hlc": None} for e in row["events"]]
    _clock_behind(rows, hlc, ns, 1500)
    next(r for r in rows if r["name"].startswith("execute_tool"))["hlc"] = None


# name: (contract_turn arguments, a mutation of the rows or None, the kinds expected on that turn)
SCENARIOS: dict[str, tuple[dict[str, Any], Any, list[str]]] = {
    "clean": ({}, None, []),
    "clean_cancel": (dict(cancel_at=1000, dispatch_at=None), None, []),
    "commit_after_cancel": (
        dict(cancel_at=1000, tier="button_reversible", approved_at=850, dispatch_at=900, commit_at=1100),
        None,
        ["cancelled_but_committed"],
    ),
    "commit_before_cancel_shown": (dict(**REVERSIBLE_BEFORE_CANCEL, commit_at=950, receipt_at=960), None, []),
    "commit_before_cancel_undone": (
        dict(**REVERSIBLE_BEFORE_CANCEL, commit_at=950, compensations=1),
        None,
        [],
    ),
    "commit_before_cancel_silent": (
        dict(**REVERSIBLE_BEFORE_CANCEL, commit_at=950),
        None,
        ["cancelled_but_committed"],
    ),
    "cancel_missed_runtime": (
        dict(cancel_at=1000, dispatch_at=None, reached=("stream",), acked=("http", "stream")),
        None,
        ["cancel_not_propagated"],
    ),
    "cancel_never_acked": (dict(cancel_at=1000, dispatch_at=None, acked=()), None, ["cancel_not_propagated"]),
    "cancel_missed_running_tool": (
        dict(**READ_ONLY_RUNNING, reached=("stream", "runtime"), acked=("http", "stream", "runtime")),
        None,
        ["cancel_not_propagated"],
    ),
    "cancel_reached_running_tool": (dict(**READ_ONLY_RUNNING), None, []),
    "eager_irreversible": (
        dict(dispatch="eager", approved_at=450, dispatch_at=500, commit_at=600),
        None,
        ["eager_side_effect"],
    ),
    "eager_reversible": (
        dict(tier="button_reversible", dispatch="eager", approved_at=450, dispatch_at=500, commit_at=600),
        None,
        [],
    ),
    "untiered": (dict(tier=None), None, ["untiered_tool"]),
    "tier_from_registry": (dict(tier=None, tool="send_invoice_registered"), None, []),
    "no_key": (dict(key=None), None, ["missing_idempotency_key"]),
    "no_key_read_only": (dict(key=None, tier="read_only", billable=False, charged=False), None, []),
    "no_approval": (dict(approved_at=None), None, ["unapproved_side_effect"]),
    "approval_too_late": (dict(approved_at=2300), None, ["unapproved_side_effect"]),
    "hard_without_approval": (
        dict(tier="hard_irreversible", requires_approval=False, approved_at=None),
        None,
        ["unapproved_side_effect"],
    ),
    "soft_needs_no_approval": (dict(requires_approval=False, approved_at=None), None, []),
    "never_charged": (dict(charged=False), None, ["unbilled_side_effect"]),
    "never_charged_undone": (dict(charged=False, compensations=1), None, []),
    "charged_not_committed": (dict(outcome="failed", acks=()), None, ["billed_not_committed"]),
    "tokens_over_streamed": (
        dict(cancel_at=1000, dispatch_at=None, tokens_billed=80),
        None,
        ["tokens_billed_after_cancel"],
    ),
    "tokens_as_streamed": (dict(cancel_at=1000, dispatch_at=None, tokens_billed=50), None, []),
    "tokens_not_cancelled": (dict(tokens_billed=80), None, []),
    "ghost": (dict(outcome="failed", charged=False), None, ["ghost_commit"]),
    "failed_unacked": (dict(outcome="failed", charged=False, acks=()), None, []),
    "executed_twice": (dict(acks=(("250 OK", False), ("250 OK", False))), None, ["duplicate_commit"]),
    "replayed": (dict(acks=(("250 OK", False), ("250 OK", True))), None, []),
    "compensated_twice": (dict(compensations=2), None, ["duplicate_compensation"]),
    "compensated_once": (dict(compensations=1), None, []),
    "clock_behind": ({}, lambda rows, hlc, ns: _clock_behind(rows, hlc, ns, 2000), ["causal_inversion"]),
    # 30 ms: the normal skew between channels (causal_inversion_tolerance_ms 50) is no finding
    "clock_within_tolerance": ({}, lambda rows, hlc, ns: _clock_behind(rows, hlc, ns, 2070), []),
    # 51 ms, just past the tolerance: the turn's clock offsets spread that wide, so it is still examined
    "clock_just_past_tolerance": (
        {},
        lambda rows, hlc, ns: _clock_behind(rows, hlc, ns, 2049),
        ["causal_inversion"],
    ),
    # a cancel against a side effect: any amount above the resolution, because it flips the verdict
    "cancel_dispatch_inverted": (
        dict(cancel_at=1000, tier="button_reversible", approved_at=850, dispatch_at=900, commit_at=1100),
        _dispatch_clock_ahead,
        ["cancelled_but_committed", "causal_inversion"],
    ),
    "clock_within_resolution": ({}, lambda rows, hlc, ns: _clock_behind(rows, hlc, ns, 2099.4), []),
    "no_hlc_clock_off": ({}, _no_hlc, []),
}

# A framework's turns (no contract, no HLC): the user stopped while a tool ran, and its span ended by the
# cancellation (CancelledError): name: (tool, whether a third party acknowledged the call, the kinds expected)
FRAMEWORK_SCENARIOS: dict[str, tuple[str, bool, list[str]]] = {
    "framework_stopped_sending": ("send_email", False, ["interrupted_side_effect"]),
    "framework_stopped_reading": ("lookup_order", False, []),
    "framework_stopped_but_sent": ("send_email", True, ["ghost_commit"]),
}

REGISTRY = """\
[tools.send_invoice_registered]
tier = "soft_irreversible"
[tools.send_email]
tier = "soft_irreversible"
[tools.lookup_order]
tier = "read_only"
"""


def framework_stopped_turn(builders: Any, name: str, tool: str, acked: bool) -> list[dict]:
    """A framework's turn (GenAI spans) stopped while `tool` ran: the tool's span and the run's end with the
    CancelledError; with `acked`, the third party's acknowledgement of the call arrives after."""
    f = dict(session=None, turn=None, trace=name, node="app")
    cancelled = {"exception.type": "asyncio.exceptions.CancelledError"}
    call = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    call["gen_ai.tool.call.id"] = f"c-{name}"
    rows = [
        builders.span("invoke_agent a", 0, 1010, span_id=f"{name}-run", **f, status="error",
                      attrs={"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": f"s-{name}"},
                      events=[builders.event("exception", 1005, **cancelled)]),
        builders.span("chat m", 10, 200, span_id=f"{name}-chat", parent=f"{name}-run", **f, attrs={
            "gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ["tool_calls"]}),
        builders.span(f"execute_tool {tool}", 210, 1000, span_id=f"{name}-tool", parent=f"{name}-run", **f,
                      attrs=call, status="error", events=[builders.event("exception", 1000, **cancelled)]),
    ]
    if acked:
        ack = builders.event("third_party.ack", 1500, **{"gen_ai.tool.call.id": f"c-{name}",
                                                          "turnlens.third_party.status": "250 OK"})
        relay = builders.span("POST relay", 1490, 1510, span_id=f"{name}-relay", parent=f"{name}-tool", **f,
                              kind="client", attrs={"server.address": "relay"}, events=[ack])
        rows.append(relay)
    return rows


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory, builders: Any) -> Iterator[duckdb.DuckDBPyConnection]:
    rows: list[dict] = []
    for name, (arguments, mutate, _) in SCENARIOS.items():
        turn_rows = builders.turn(
            **{"session": f"s-{name}", "turn": name, "trace": name, "key": f"k-{name}", **arguments}
        )
        if mutate:
            mutate(turn_rows, builders.hlc, builders.ns)
        rows.extend(turn_rows)
    for name, (tool, acked, _) in FRAMEWORK_SCENARIOS.items():
        rows.extend(framework_stopped_turn(builders, name, tool, acked))
    store = builders.write_store(tmp_path_factory.mktemp("divergences"), rows, registry_toml=REGISTRY)
    connection = catalog.connect(store)
    yield connection
    connection.close()


def kinds_of(con: duckdb.DuckDBPyConnection, turn: str) -> list[str]:
    return [
        r[0]
        for r in con.execute(
            "select kind from divergences where turn_id = ? order by kind", [turn]
        ).fetchall()
    ]


def finding(con: duckdb.DuckDBPyConnection, turn: str) -> dict:
    cursor = con.execute("select * from divergences where turn_id = ?", [turn])
    names = [d[0] for d in cursor.description]
    [row] = cursor.fetchall()
    return dict(zip(names, row, strict=True))


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_scenario_has_exactly_its_findings(con: duckdb.DuckDBPyConnection, name: str) -> None:
    assert kinds_of(con, name) == SCENARIOS[name][2]


@pytest.mark.parametrize("name", FRAMEWORK_SCENARIOS)
def test_each_framework_scenario_has_exactly_its_findings(con: duckdb.DuckDBPyConnection, name: str) -> None:
    found = con.execute(
        "select kind from divergences where session_id = ? order by kind", [f"s-{name}"]
    ).fetchall()
    assert [kind for (kind,) in found] == FRAMEWORK_SCENARIOS[name][2]


def test_every_kind_fires_somewhere_and_is_silent_somewhere(con: duckdb.DuckDBPyConnection) -> None:
    """Read from the store, not from the table above: each kind is reported for some turn of the store,
    and for each kind there are more clean turns than firing ones, so a detector that fired on every
    turn would fail here even if the table above were wrong with it."""
    fired = {row[0] for row in con.execute("select distinct kind from divergences").fetchall()}
    assert fired == set(KINDS)
    turns = con.execute("select count(distinct turn_id) from turns").fetchone()[0]
    for kind, firing_turns in con.execute(
        "select kind, count(distinct turn_id) from divergences group by kind"
    ).fetchall():
        assert firing_turns < turns / 2, f"{kind} fires on {firing_turns} of {turns} turns"


def test_the_documented_kinds_are_the_kernel_list(con: duckdb.DuckDBPyConnection) -> None:
    doc = con.execute(
        "select comment from duckdb_columns() where table_name = 'divergences' and column_name = 'kind'"
    ).fetchone()[0]
    assert [k.strip(" .") for k in doc.split(",")] == KINDS


def test_findings_name_the_call_key_and_moment(con: duckdb.DuckDBPyConnection, builders: Any) -> None:
    late = finding(con, "commit_after_cancel")
    assert (late["session_id"], late["tool_call_id"], late["idempotency_key"]) == (
        "s-commit_after_cancel",
        "call1",
        "k-commit_after_cancel",
    )
    assert late["detected_hlc"] == builders.hlc(1100)
    assert late["detected_at"].timestamp() * 1000 == pytest.approx(builders.hlc(1100) >> 16)
    assert late["severity"] == "high"
    assert "committed 100 ms after the cancel was requested (user_clicked)" in late["evidence"]


def test_evidence_reads_as_what_happened(con: duckdb.DuckDBPyConnection) -> None:
    assert "never reached the agent runtime" in finding(con, "cancel_missed_runtime")["evidence"]
    assert "No layer acknowledged it" in finding(con, "cancel_never_acked")["evidence"]
    assert "tool layer never heard of it" in finding(con, "cancel_missed_running_tool")["evidence"]
    assert "1500 ms before it ended" in finding(con, "eager_irreversible")["evidence"]
    assert "100 ms before approval was granted" in finding(con, "approval_too_late")["evidence"]
    assert "80 tokens" in finding(con, "tokens_over_streamed")["evidence"]
    assert "streamed 50 tokens" in finding(con, "tokens_over_streamed")["evidence"]
    ghost = finding(con, "ghost")
    assert ghost["severity"] == "critical" and "250 OK" in ghost["evidence"] and "failed" in ghost["evidence"]
    assert "2 times" in finding(con, "executed_twice")["evidence"]
    inversion = finding(con, "clock_behind")
    assert "tool.dispatched on agent" in inversion["evidence"] and "100.0 ms later" in inversion["evidence"]
    assert inversion["severity"] == "low"


def test_a_cancel_inverted_against_a_side_effect_names_the_pair(con: duckdb.DuckDBPyConnection) -> None:
    inversion = con.execute(
        "select severity, evidence from divergences where turn_id = 'cancel_dispatch_inverted' "
        "and kind = 'causal_inversion'"
    ).fetchone()
    assert inversion[0] == "medium"
    assert "cancel.requested on gw comes after tool.dispatched on agent by HLC" in inversion[1]
    assert "10.0 ms earlier" in inversion[1]


def test_a_turn_without_hlc_is_ordered_by_wall_clock(con: duckdb.DuckDBPyConnection) -> None:
    ordering = con.execute("select ordering from turns where turn_id = 'no_hlc_clock_off'").fetchone()
    assert ordering == ("wall_clock",)
