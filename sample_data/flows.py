"""The recurring shapes of a streaming agent turn, written once: opening the turn across the gateway,
the streamer and the runtime; the token stream; a tool call through the tool executor to its third
party and billing; the speculative flush and approval; the cancel chain with its per-hop delays,
discards, forwarding to running tools, compensations and acknowledgements.

Each `plan_*` only computes times, so a scenario can place a cancel relative to a commit before
anything is scheduled; each `schedule_*` then puts spans and events on the fleet.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry.trace import SpanKind
from turnlens.instrument import tracing as instrument
from turnlens.instrument.tracing import ToolCall
from turnlens.kernel import contract as c
from turnlens.sample_data.turn import (
    BILLING,
    HTTP,
    RUNTIME,
    STREAMER,
    TOKEN_PRICE,
    TOOLS,
    WS,
    Stream,
    Turn,
    lognormal,
)


@dataclass(frozen=True)
class ToolSpec:
    """A tool of the fleet's registry: its tier, the third party it acts on, whether it is billed."""

    name: str
    tier: str | None
    third_party: str | None  # node instance; None for in-process read-only tools
    work_ms: float  # median latency of the work (third party or in process)
    billable: bool = False
    price: float = 0.0
    status: str = "200 OK"  # what the third party answers when it acts


TOOL_SPECS: dict[str, ToolSpec] = {
    s.name: s
    for s in (
        ToolSpec("search_docs", "read_only", None, 180),
        ToolSpec("lookup_order", "read_only", None, 120),
        ToolSpec("get_weather", "read_only", None, 90),
        ToolSpec("create_ticket", "button_reversible", "ticketing-1", 220, status="201 Created"),
        ToolSpec("create_draft", "button_reversible", "email-relay-1", 140, status="201 Created"),
        ToolSpec("toggle_feature_flag", "button_reversible", "deploy-1", 100),
        ToolSpec("charge_card", "button_reversible", "payments-1", 350, status="201 Created"),
        ToolSpec("send_email", "soft_irreversible", "email-relay-1", 300, status="250 OK"),
        ToolSpec("send_invoice_email", "soft_irreversible", "email-relay-1", 320, True, 0.05, "250 OK"),
        ToolSpec("kick_off_deploy", "hard_irreversible", "deploy-1", 450, status="202 Accepted"),
        ToolSpec("send_sms", "hard_irreversible", "sms-gateway-1", 250, True, 0.08),
        ToolSpec("update_crm_record", None, "ticketing-1", 200),  # registered without a tier
    )
}
READ_ONLY_TOOLS = ("search_docs", "lookup_order", "get_weather")


def make_call(turn: Turn, name: str, *, keyed: bool = True, dispatch: str | None = None) -> ToolCall:
    """A call of a registry tool with the contract's attributes; speculative when its tier says so."""
    spec = TOOL_SPECS[name]
    if dispatch is None:
        dispatch = "speculative" if spec.tier in ("soft_irreversible", "hard_irreversible") else "eager"
    side_effecting = spec.tier != "read_only"
    args = {"n": turn.rng.getrandbits(24)}
    return ToolCall(
        name,
        turn.call_id(),
        tier=spec.tier,
        dispatch=dispatch,
        idempotency_key=turn.key_for(name, args) if keyed and side_effecting else None,
        billable=spec.billable,
    )


# --- opening and streaming ------------------------------------------------------------------------


def open_turn(turn: Turn, *, agent: str = "support-agent", model: str = "gpt-4.1") -> float:
    """Gateway → streamer → runtime → model; returns when the first token is ready."""
    turn.open(
        0.0,
        "http",
        HTTP,
        "POST /v1/chat",
        kind=SpanKind.SERVER,
        attributes={c.HTTP_REQUEST_METHOD: "POST", "http.route": "/v1/chat", "url.path": "/v1/chat"},
    )
    turn.event(0.05, "http", instrument.user_input, kind="message")
    t1 = 0.2 + turn.hop()
    turn.open(t1, "stream", STREAMER, "stream turn", parent="http", sent_at=0.1, kind=SpanKind.SERVER)
    t2 = t1 + 0.3 + turn.hop()
    turn.open(
        t2,
        "runtime",
        RUNTIME,
        f"invoke_agent {agent}",
        parent="stream",
        sent_at=t1 + 0.2,
        kind=SpanKind.SERVER,
        attributes={c.GEN_AI_OPERATION_NAME: "invoke_agent", "gen_ai.agent.name": agent},
    )
    t3 = t2 + 0.5
    turn.open(
        t3,
        "chat",
        RUNTIME,
        f"chat {model}",
        parent="runtime",
        kind=SpanKind.CLIENT,
        attributes={
            c.GEN_AI_OPERATION_NAME: "chat",
            "gen_ai.request.model": model,
            "gen_ai.provider.name": "openai",
        },
    )
    return t3 + lognormal(turn.rng, 450, 0.4, 150, 3000)


def make_stream(turn: Turn, start: float, *, total: int | None = None, median_tokens: float = 650) -> Stream:
    if total is None:
        total = int(lognormal(turn.rng, median_tokens, 0.6, 60, 4000))
    return Stream(start, total, lognormal(turn.rng, 70, 0.35, 25, 200))


def schedule_progress(turn: Turn, stream: Stream, *, until: float | None = None) -> None:
    """`stream.progress` on the streamer for every progress point before `until` (all by default)."""
    for when, tokens in stream.points:
        if until is None or when < until:
            turn.event(when, "stream", instrument.stream_progress, tokens)


def charge_tokens(turn: Turn, t: float, tokens: int) -> None:
    """The runtime asks billing to charge the turn's tokens."""
    key = f"bill-tokens:{t}"
    start = t + turn.hop()
    turn.open(start, key, BILLING, "charge tokens", parent="runtime", sent_at=t, kind=SpanKind.SERVER)
    turn.event(
        start + 2.0, key, instrument.tokens_charged, tokens=tokens, amount=round(tokens * TOKEN_PRICE, 6)
    )
    turn.close(start + 2.5, key)


def complete_stream(turn: Turn, stream: Stream, *, bill_tokens: int | None = None) -> float:
    """The model finishes: progress, `stream.completed(stop)`, the streamer tells the runtime the stream
    ended cleanly, tokens are billed. Returns when the runtime knows (where speculative calls flush)."""
    schedule_progress(turn, stream)
    t_gen = stream.end + 0.5
    turn.close(t_gen, "chat")
    t_done = t_gen + 0.2 + turn.hop()
    turn.signal(t_gen + 0.1, "runtime", t_done, "stream")
    turn.event(t_done + 0.1, "stream", instrument.stream_completed, "stop")
    t_known = t_done + 0.3 + turn.hop()
    turn.signal(t_done + 0.2, "stream", t_known, "runtime")
    charge_tokens(turn, t_known + 0.2, stream.total if bill_tokens is None else bill_tokens)
    return t_known + 0.5


# --- tool calls -----------------------------------------------------------------------------------


@dataclass
class ToolPlan:
    """The timeline of one tool call, computed before anything is scheduled."""

    call: ToolCall
    spec: ToolSpec
    dispatch: float
    start: float
    prepared: float
    tp_start: float | None  # the third party received the request
    ack: float | None  # the third party acknowledged it
    commit: float | None  # the tool layer recorded the commit
    done: float  # the tool span ends and the result leaves for the runtime
    returned: float  # the runtime has the result
    third_party: str | None
    fail: str | None = None
    retry: str | None = None  # "honoured" / "ignored": the first attempt timed out and was retried
    retry_start: float | None = None  # the client gives up on the first attempt and resends
    retry_tp_start: float | None = None  # the third party receives the retry
    answered: float | None = None  # a refusal ("rejected") leaves the third party
    extra_acks: list[float] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"tool:{self.call.call_id}"


def plan_tool(
    turn: Turn,
    t: float,
    call: ToolCall,
    *,
    third_party: str | None = None,
    fail: str | None = None,
    retry: str | None = None,
    work_ms: float | None = None,
) -> ToolPlan:
    """`fail`: "timeout" (the tool gives up at its 5 s budget; with the third party still acting) or
    "rejected" (the third party refuses). `retry`: the first attempt's answer is lost and the tool retries
    with the same idempotency key, which the third party "honoured" or "ignored"."""
    spec = TOOL_SPECS[call.name]
    third_party = third_party or spec.third_party
    start = t + turn.hop()
    prepared = start + 0.5 + turn.rng.uniform(0.2, 2.0)
    work = work_ms if work_ms is not None else lognormal(turn.rng, spec.work_ms, 0.5, 20, 4000)
    plan = ToolPlan(call, spec, t, start, prepared, None, None, None, 0.0, 0.0, third_party, fail, retry)
    if third_party is None:  # read-only work in the tool executor itself
        plan.done = prepared + work
    else:
        plan.tp_start = prepared + 0.3 + turn.hop()  # the request leaves at prepared + 0.1
        answered = plan.tp_start + work
        if fail == "timeout":  # the tool gives up at its budget; the third party acts anyway, later
            plan.done = start + 5000.0
            plan.ack = max(answered, plan.done + lognormal(turn.rng, 250, 0.5, 20, 2000))
        elif fail == "rejected":
            plan.answered = answered
            plan.done = answered + 0.6 + turn.hop()
        elif retry is not None:  # the first answer is lost; the client retries after 1.5 s
            plan.retry_start = prepared + 1500.0
            plan.ack = min(max(answered, plan.tp_start + 1.0), plan.retry_start - 1.0)
            plan.retry_tp_start = plan.retry_start + turn.hop()
            second_ack = plan.retry_tp_start + lognormal(turn.rng, 60, 0.4, 5, 400)
            plan.extra_acks.append(second_ack)
            plan.commit = second_ack + 0.4 + turn.hop()
        else:
            plan.ack = answered
            plan.commit = answered + 0.4 + turn.hop()
        if plan.commit is not None:
            plan.done = plan.commit + 0.6
    plan.returned = plan.done + turn.hop()
    return plan


@dataclass
class ToolCancel:
    """How the cancel meets a running tool call: when it arrives and when the runtime hears the ack."""

    sent: float  # the runtime forwards it
    arrives: float  # the tool layer receives it
    back: float = 0.0  # the runtime hears the tool's acknowledgement (set when scheduled)


def schedule_tool(
    turn: Turn,
    plan: ToolPlan,
    *,
    buffered: bool = False,
    bill: bool = True,
    charge_at_prepare: bool = False,
    cancel: ToolCancel | None = None,
) -> None:
    """Puts the call on the fleet: `tool.dispatched` on the runtime, the tool span with its lifecycle,
    the third party's span with its acknowledgement, the side-effect charge when billable."""
    call, key = plan.call, plan.key
    turn.event(plan.dispatch, "runtime", instrument.tool_dispatched, call)
    attrs = {c.GEN_AI_OPERATION_NAME: "execute_tool", **call.attributes()}
    turn.open(
        plan.start,
        key,
        TOOLS,
        f"execute_tool {call.name}",
        parent="runtime",
        sent_at=plan.dispatch + 0.05,
        kind=SpanKind.SERVER,
        attributes=attrs,
    )
    side_effecting = plan.third_party is not None
    if side_effecting:
        turn.event(plan.prepared, key, instrument.tool_prepared, call)
    if cancel is not None and plan.fail is None and plan.commit is None and cancel.arrives < plan.done:
        _tool_stops_on_cancel(turn, plan, cancel)  # read-only work, stopped midway
        return
    if cancel is not None and plan.commit is not None and cancel.arrives < plan.prepared + 0.1:
        _tool_stops_on_cancel(turn, plan, cancel)  # stopped before the request left: nothing happened outside
        return
    if plan.third_party is not None and plan.tp_start is not None:
        _third_party(turn, plan, charge_at_prepare=charge_at_prepare)
    end = plan.done
    if plan.commit is not None:
        turn.event(plan.commit, key, instrument.tool_committed, call)
        if call.billable and bill:
            _charge_side_effect(turn, plan, plan.commit + 0.1)
    elif plan.fail is not None:
        turn.event(plan.done - 0.4, key, instrument.tool_failed, call)
        turn.event(plan.done - 0.2, key, instrument.partial_stored, call)
    if cancel is not None:
        # The request already left for the third party: the tool cannot take it back. It logs the
        # cancel and acknowledges once its own work is over.
        turn.signal(cancel.sent, "runtime", cancel.arrives, key)
        turn.event(cancel.arrives + 0.05, key, instrument.cancel_received)
        t_ack = max(cancel.arrives + 0.3, (plan.commit or plan.done) + 0.2)
        turn.event(t_ack, key, instrument.cancel_acknowledged)
        end = max(end, t_ack + 0.3)
        cancel.back = t_ack + 0.2 + turn.hop()
        turn.signal(t_ack + 0.1, key, cancel.back, "runtime")
    if end > plan.done:
        plan.returned = end + turn.hop()
    turn.signal(end - 0.1, key, plan.returned, "runtime")
    turn.close(
        end,
        key,
        error="tool budget exceeded"
        if plan.fail == "timeout"
        else ("third party refused" if plan.fail else None),
    )


def _charge_side_effect(turn: Turn, plan: ToolPlan, t: float) -> None:
    """The tool layer asks billing to charge a side effect, naming the call."""
    key = f"bill:{plan.call.call_id}"
    start = t + turn.hop()
    turn.open(
        start,
        key,
        BILLING,
        "charge side effect",
        parent=plan.key,
        sent_at=t,
        kind=SpanKind.SERVER,
        attributes=plan.call.reference(),
    )
    turn.event(start + 2.0, key, instrument.side_effect_charged, plan.call, amount=plan.spec.price)
    turn.close(start + 2.5, key)


def _tool_stops_on_cancel(turn: Turn, plan: ToolPlan, cancel: ToolCancel) -> None:
    """The cancel reaches the tool before anything changed outside: it stops, stores its partial result."""
    key, call = plan.key, plan.call
    turn.signal(cancel.sent, "runtime", cancel.arrives, key)
    turn.event(cancel.arrives + 0.05, key, instrument.cancel_received)
    turn.event(cancel.arrives + 0.4, key, instrument.partial_stored, call)
    turn.event(cancel.arrives + 0.8, key, instrument.cancel_acknowledged)
    cancel.back = cancel.arrives + 1.0 + turn.hop()
    turn.signal(cancel.arrives + 0.9, key, cancel.back, "runtime")
    turn.close(cancel.arrives + 1.0, key, error="cancelled")


def _third_party(turn: Turn, plan: ToolPlan, *, charge_at_prepare: bool) -> None:
    call, key = plan.call, plan.key
    assert plan.third_party is not None and plan.tp_start is not None
    tp_key = f"tp:{call.call_id}"
    host = turn.fleet.node(plan.third_party).spec.service
    client_attrs = {
        c.SERVER_ADDRESS: f"{host}.example.net",
        c.HTTP_REQUEST_METHOD: "POST",
        **call.reference(),
    }
    turn.open(
        plan.tp_start,
        tp_key,
        plan.third_party,
        f"POST /{call.name}",
        parent=key,
        sent_at=plan.prepared + 0.1,
        kind=SpanKind.SERVER,
        attributes=client_attrs,
    )
    if charge_at_prepare:  # the bug: billing at prepare time, before anything committed
        _charge_side_effect(turn, plan, plan.prepared + 0.1)
    if plan.fail == "rejected":
        assert plan.answered is not None
        turn.signal(plan.answered, tp_key, plan.done - 0.5, key)
        turn.close(plan.answered + 0.01, tp_key, error="550 mailbox unavailable")
        return
    assert plan.ack is not None
    turn.event(plan.ack, tp_key, instrument.third_party_ack, call, status=plan.spec.status)
    turn.close(plan.ack + 0.3, tp_key)
    if plan.fail == "timeout":  # the answer arrives after the tool gave up
        return
    if plan.retry is None:
        turn.signal(plan.ack + 0.2, tp_key, plan.commit - 0.1 if plan.commit else plan.done, key)
        return
    assert plan.retry_start is not None and plan.commit is not None
    retry_key = f"tp-retry:{call.call_id}"
    assert plan.retry_tp_start is not None
    turn.open(
        plan.retry_tp_start,
        retry_key,
        plan.third_party,
        f"POST /{call.name}",
        parent=key,
        sent_at=plan.retry_start,
        kind=SpanKind.SERVER,
        attributes={**client_attrs, "http.request.resend_count": 1},
    )
    second_ack = plan.extra_acks[0]
    turn.event(
        second_ack,
        retry_key,
        instrument.third_party_ack,
        call,
        status=plan.spec.status,
        replayed=plan.retry == "honoured",
    )
    turn.close(second_ack + 0.3, retry_key)
    turn.signal(second_ack + 0.2, retry_key, plan.commit - 0.1, key)


def buffer_call(turn: Turn, t: float, call: ToolCall) -> None:
    """A speculative call parsed from the stream: queued on the runtime, not sent."""
    turn.event(t, "runtime", instrument.tool_buffered, call)


def receipt(turn: Turn, t: float, call: ToolCall) -> float:
    """The runtime tells the gateway to show the side effect in the transcript ("we sent … — undo")."""
    t_shown = t + turn.hop()
    turn.signal(t, "runtime", t_shown, "http")
    turn.event(t_shown + 0.1, "http", instrument.transcript_receipt, call)
    return t_shown + 0.2


def ask_approval(turn: Turn, t: float, call: ToolCall, *, granted: bool, wait: bool = True) -> float:
    """`approval.requested` on the runtime, the user answers in the gateway after a few seconds; returns
    when the runtime has the answer (`wait=False`: the runtime does not wait for it — the bug)."""
    turn.event(t, "runtime", instrument.approval_requested, call)
    t_prompt = t + 0.2 + turn.hop()
    turn.signal(t + 0.1, "runtime", t_prompt, "http")
    t_answer = t_prompt + lognormal(turn.rng, 3500, 0.5, 800, 20000)
    turn.event(t_answer, "http", instrument.approval_granted if granted else instrument.approval_denied, call)
    t_known = t_answer + 0.2 + turn.hop()
    turn.signal(t_answer + 0.1, "http", t_known, "runtime")
    return t_known + 0.1 if wait else t + 0.3


# --- the cancel chain -----------------------------------------------------------------------------


@dataclass
class CancelChain:
    """When each layer hears of a cancel; computed first so tools and commits can be placed around it."""

    requested: float
    origin: str
    entry: str  # "http" (the gateway's side POST / disconnect) or "ws" (the WebSocket control channel)
    stream: float
    runtime: float
    tool: float


def plan_cancel(
    turn: Turn,
    t: float,
    *,
    origin: str = "user_clicked",
    entry: str = "http",
    channel_skew: float | None = None,
) -> CancelChain:
    """`channel_skew`: how much later the WebSocket channel delivers than the token stream (5–50 ms)."""
    if entry == "ws":
        skew = channel_skew if channel_skew is not None else turn.rng.uniform(5.0, 50.0)
        runtime = t + skew + turn.cancel_hop(t)
        stream = runtime + 0.3 + turn.cancel_hop(t)
    else:
        stream = t + 0.1 + turn.cancel_hop(t)
        runtime = stream + 0.5 + turn.cancel_hop(t)
    return CancelChain(t, origin, entry, stream, runtime, runtime + 0.4 + turn.cancel_hop(t))


def forward(chain: CancelChain) -> ToolCancel:
    """The runtime forwards the cancel to a running tool call."""
    return ToolCancel(sent=chain.runtime + 0.35, arrives=chain.tool)


def schedule_cancel(
    turn: Turn,
    chain: CancelChain,
    stream: Stream,
    *,
    reach_runtime: bool = True,
    acknowledge: bool = True,
    running: list[ToolCancel] | None = None,
    discard: list[ToolCall] | None = None,
    compensate: list[tuple[ToolCall, int]] | None = None,
    bill_tokens: int | None = None,
    stream_done: bool = False,
) -> float:
    """The three verbs of a cancel handler: abort the generation, discard the speculative buffer,
    compensate committed eager calls; every layer reached logs `cancel.received`, and, once its work
    has stopped, `cancel.acknowledged`. Returns when the turn is over."""
    turn.cancelled = True
    t = chain.requested
    entry_key = "http" if chain.entry == "http" else "ws"
    turn.event(t, entry_key, instrument.cancel_requested, origin=chain.origin)
    turn.event(t + 0.05, entry_key, instrument.cancel_received)
    if not stream_done:
        schedule_progress(turn, stream, until=t)
    stream_events = _stream_hears(
        turn, chain, acknowledge=acknowledge, stream_done=stream_done, reach_runtime=reach_runtime
    )
    if not reach_runtime:
        # the runtime swallowed the AbortError: the message arrives, nothing is logged, work goes on
        turn.signal(chain.stream + 0.4, "stream", chain.runtime, "runtime")
        return stream_events
    if chain.entry == "http":
        turn.signal(chain.stream + 0.4, "stream", chain.runtime, "runtime")
    else:
        turn.signal(t + 0.1, "ws", chain.runtime, "runtime")
    turn.event(chain.runtime + 0.05, "runtime", instrument.cancel_received)
    if not stream_done:
        turn.close(chain.runtime + 0.2, "chat", error="cancelled")
    for call in discard or []:
        turn.event(chain.runtime + 0.3, "runtime", instrument.tool_discarded, call)
    backs = [chain.runtime + 0.5] + [tool.back for tool in running or []]
    for call, fires in compensate or []:
        t_handler = chain.runtime + 0.4
        for n in range(fires):  # an abort handler wired to two signals fires twice
            backs.append(_compensate(turn, t_handler, call, n))
            t_handler += turn.rng.uniform(20.0, 150.0)
    t_ack = max(backs) + 0.3
    if acknowledge:
        turn.event(t_ack, "runtime", instrument.cancel_acknowledged)
    if chain.entry == "http":
        t_stream_ack = t_ack + 0.1 + turn.cancel_hop(t)
        turn.signal(t_ack + 0.1, "runtime", t_stream_ack, "stream")
        if acknowledge:
            turn.event(t_stream_ack + 0.1, "stream", instrument.cancel_acknowledged)
        t_http_ack = t_stream_ack + 0.2 + turn.cancel_hop(t)
        turn.signal(t_stream_ack + 0.15, "stream", t_http_ack, "http")
        if acknowledge:
            turn.event(t_http_ack + 0.1, "http", instrument.cancel_acknowledged)
        t_end = t_http_ack + 0.2
    else:
        t_ws_ack = t_ack + 0.1 + turn.cancel_hop(t)
        turn.signal(t_ack + 0.1, "runtime", t_ws_ack, "ws")
        if acknowledge:
            turn.event(t_ws_ack + 0.1, "ws", instrument.cancel_acknowledged)
        t_end = max(t_ws_ack, stream_events) + 0.2
    tokens = stream.streamed_before(t) if bill_tokens is None else bill_tokens
    charge_tokens(turn, t_ack + 0.5, tokens)
    return t_end


def _stream_hears(
    turn: Turn, chain: CancelChain, *, acknowledge: bool, stream_done: bool, reach_runtime: bool
) -> float:
    """The streamer stops sending tokens; returns when it is done with the cancel."""
    source = "http" if chain.entry == "http" else "runtime"
    sent = chain.requested + 0.1 if chain.entry == "http" else chain.runtime + 0.3
    turn.signal(sent, source, chain.stream, "stream")
    turn.event(chain.stream + 0.05, "stream", instrument.cancel_received)
    if not stream_done:
        turn.event(chain.stream + 0.2, "stream", instrument.stream_completed, "cancelled")
    if reach_runtime and chain.entry == "http":
        return chain.stream + 0.3  # the streamer acknowledges once the runtime has
    if acknowledge:
        turn.event(chain.stream + 0.5, "stream", instrument.cancel_acknowledged)
    if chain.entry == "http":  # the runtime never heard: the streamer answers the gateway itself
        t_http = chain.stream + 0.6 + turn.cancel_hop(chain.requested)
        turn.signal(chain.stream + 0.55, "stream", t_http, "http")
        if acknowledge:
            turn.event(t_http + 0.1, "http", instrument.cancel_acknowledged)
        return t_http + 0.2
    return chain.stream + 0.6


def _compensate(turn: Turn, t: float, call: ToolCall, n: int) -> float:
    """One run of the compensation hook on the tool layer; returns when the runtime hears back."""
    key = f"comp{n}:{call.call_id}"
    start = t + turn.hop()
    turn.open(
        start,
        key,
        TOOLS,
        f"compensate {call.name}",
        parent="runtime",
        sent_at=t,
        kind=SpanKind.SERVER,
        attributes=call.attributes(),
    )
    done = start + lognormal(turn.rng, 120, 0.5, 10, 1500)
    turn.event(done, key, instrument.tool_compensated, call)
    back = done + 0.3 + turn.hop()
    turn.signal(done + 0.2, key, back, "runtime")
    turn.close(done + 0.3, key)
    return back


def open_ws_channel(turn: Turn, t: float) -> None:
    """The WebSocket control channel: another trace, linked to the turn, carrying no turn identity."""
    turn.open(
        t,
        "ws",
        WS,
        "WS /v1/control",
        kind=SpanKind.SERVER,
        link_to="http",
        identity=False,
        attributes={"network.protocol.name": "websocket"},
    )
