"""The scenario library: each known incident (and each clean shape) as a named, parameterised
function that plays one turn on the fleet and labels the findings the detectors must report.

A scenario returns when its turn is over (ms from the turn's start). Labels follow the detector table
to the letter; the clean scenarios label nothing and are built so that no detector has cause to fire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from opentelemetry.trace import SpanKind
from turnlens.instrument import tracing as instrument
from turnlens.kernel import contract as c
from turnlens.kernel import findings as kinds
from turnlens.sample_data.flows import (
    READ_ONLY_TOOLS,
    ToolPlan,
    ask_approval,
    buffer_call,
    charge_tokens,
    complete_stream,
    forward,
    make_call,
    make_stream,
    open_turn,
    open_ws_channel,
    plan_cancel,
    plan_tool,
    receipt,
    schedule_cancel,
    schedule_tool,
)
from turnlens.sample_data.turn import Stream, Turn, lognormal


def _stream_covering(stream: Stream, t: float, margin: float = 300.0) -> Stream:
    """The same stream, made long enough to still be running `margin` ms after t."""
    if stream.end >= t + margin:
        return stream
    return Stream(stream.start, stream.tokens_at(t + margin) + 1, stream.rate)


def _at_fraction(turn: Turn, stream: Stream, low: float, high: float) -> float:
    return stream.start + (stream.end - stream.start) * turn.rng.uniform(low, high)


# --- clean shapes ---------------------------------------------------------------------------------


def clean_chat(turn: Turn) -> float:
    """Text only; the stream completes and its tokens are billed."""
    return complete_stream(turn, make_stream(turn, open_turn(turn)))


def clean_read_tools(turn: Turn, *, calls: int | None = None) -> float:
    """One to three read-only tools dispatched eagerly mid-stream, as they should be."""
    stream = make_stream(turn, open_turn(turn), median_tokens=800)
    plans = []
    for _ in range(calls or turn.rng.randint(1, 3)):
        plan = plan_tool(
            turn, _at_fraction(turn, stream, 0.05, 0.7), make_call(turn, turn.rng.choice(READ_ONLY_TOOLS))
        )
        schedule_tool(turn, plan)
        plans.append(plan)
    return max([complete_stream(turn, stream)] + [p.returned for p in plans])


def clean_speculative_flush(turn: Turn, *, tool: str | None = None) -> float:
    """A soft-irreversible call buffered mid-stream, flushed once the stream ended cleanly, billed when
    billable, and shown to the user in the transcript."""
    stream = make_stream(turn, open_turn(turn))
    call = make_call(turn, tool or turn.rng.choice(["send_email", "send_invoice_email"]))
    buffer_call(turn, _at_fraction(turn, stream, 0.2, 0.8), call)
    plan = plan_tool(turn, complete_stream(turn, stream) + 0.5, call)
    schedule_tool(turn, plan)
    return receipt(turn, plan.returned + 0.3, call)


def approval_flow(turn: Turn, *, granted: bool = True, tool: str | None = None) -> float:
    """A hard-irreversible call buffered, approval asked once the stream ended; dispatched when granted,
    discarded when denied."""
    stream = make_stream(turn, open_turn(turn))
    call = make_call(turn, tool or turn.rng.choice(["send_sms", "kick_off_deploy"]))
    buffer_call(turn, _at_fraction(turn, stream, 0.3, 0.9), call)
    answered = ask_approval(turn, complete_stream(turn, stream) + 0.3, call, granted=granted)
    if not granted:
        turn.event(answered + 0.2, "runtime", instrument.tool_discarded, call)
        return answered + 0.5
    plan = plan_tool(turn, answered + 0.2, call)
    schedule_tool(turn, plan)
    return receipt(turn, plan.returned + 0.3, call)


def speculative_discarded_on_cancel(turn: Turn) -> float:
    """Speculative calls buffered, then the user stops: the handler discards the buffer, nothing is sent."""
    stream = make_stream(turn, open_turn(turn), median_tokens=900)
    calls = [
        make_call(turn, name)
        for name in turn.rng.sample(["send_email", "send_sms", "kick_off_deploy"], turn.rng.randint(1, 2))
    ]
    for call in calls:
        buffer_call(turn, _at_fraction(turn, stream, 0.1, 0.45), call)
    chain = plan_cancel(turn, _at_fraction(turn, stream, 0.55, 0.9))
    return schedule_cancel(turn, chain, stream, discard=calls)


def user_stops_stream(turn: Turn, *, origin: str | None = None) -> float:
    """The user stops a text stream (click or closed tab); every layer hears and acknowledges; the
    tokens streamed before the cancel are billed."""
    stream = make_stream(turn, open_turn(turn))
    t_cancel = max(stream.start + 200.0, _at_fraction(turn, stream, 0.2, 0.9))
    stream = _stream_covering(stream, t_cancel)
    chain = plan_cancel(
        turn, t_cancel, origin=origin or turn.rng.choice(["user_clicked", "client_disconnect"])
    )
    return schedule_cancel(turn, chain, stream)


def stop_after_read_tool(turn: Turn) -> float:
    """A read-only lookup finished, then the user stops the stream: nothing was running, nothing changed
    outside, every layer the cancel reaches acknowledges it."""
    stream = make_stream(turn, open_turn(turn), median_tokens=900)
    plan = plan_tool(
        turn, _at_fraction(turn, stream, 0.02, 0.2), make_call(turn, turn.rng.choice(READ_ONLY_TOOLS))
    )
    schedule_tool(turn, plan)
    t_cancel = max(plan.returned + 50.0, _at_fraction(turn, stream, 0.4, 0.9))
    stream = _stream_covering(stream, t_cancel)
    return schedule_cancel(turn, plan_cancel(turn, t_cancel), stream)


def compensated_on_cancel(turn: Turn, *, handler_fires: int = 1, tool: str | None = None) -> float:
    """A button-reversible call committed eagerly; on cancel the handler compensates it. With
    `handler_fires=2` the abort handler is wired to two signals and compensates twice (double refund)."""
    stream = make_stream(turn, open_turn(turn), median_tokens=900)
    call = make_call(turn, tool or turn.rng.choice(["charge_card", "create_draft", "toggle_feature_flag"]))
    plan = plan_tool(turn, _at_fraction(turn, stream, 0.05, 0.3), call)
    schedule_tool(turn, plan)
    t_cancel = plan.returned + turn.rng.uniform(200.0, 1500.0)
    stream = _stream_covering(stream, t_cancel)
    end = schedule_cancel(turn, plan_cancel(turn, t_cancel), stream, compensate=[(call, handler_fires)])
    if handler_fires > 1:
        turn.label(kinds.DUPLICATE_COMPENSATION, call)
    return end


def typing_cancel(turn: Turn, *, commits: bool = False) -> float:
    """The user starts typing while a tool call runs; the cancel (`user_typed`) enters on the WebSocket
    channel, in another trace linked to the turn, 5–50 ms behind the token stream. A read-only call is
    stopped and stores its partial result; a ticket whose request already left commits after the cancel
    was requested (`commits=True`)."""
    stream = make_stream(turn, open_turn(turn), median_tokens=1000)
    name = "create_ticket" if commits else turn.rng.choice(READ_ONLY_TOOLS)
    call = make_call(turn, name)
    work = lognormal(turn.rng, 250 if commits else 900, 0.4, 40 if commits else 400, 3000)
    plan = plan_tool(turn, _at_fraction(turn, stream, 0.05, 0.4), call, work_ms=work)
    if commits:
        assert plan.commit is not None and plan.tp_start is not None
        t_cancel = max(plan.tp_start + 0.5, plan.commit - turn.rng.uniform(3.0, 8.0))
        chain = plan_cancel(
            turn, t_cancel, origin="user_typed", entry="ws", channel_skew=turn.rng.uniform(10, 50)
        )
    else:
        t_cancel = plan.start + (plan.done - plan.start) * turn.rng.uniform(0.1, 0.4)
        chain = plan_cancel(turn, t_cancel, origin="user_typed", entry="ws")
        if chain.tool >= plan.done - 1.0:  # the slow channel: the search is still running when it lands
            plan.done = chain.tool + 50.0
            plan.returned = plan.done + turn.hop()
    stream = _stream_covering(stream, t_cancel)
    t_typing = t_cancel - turn.rng.uniform(0.5, 3.0)
    open_ws_channel(turn, t_typing)
    turn.event(t_typing + 0.05, "ws", instrument.user_input, kind="typing")
    tool_cancel = forward(chain)
    schedule_tool(turn, plan, cancel=tool_cancel)
    end = schedule_cancel(turn, chain, stream, running=[tool_cancel])
    if commits:
        turn.label(kinds.CANCELLED_BUT_COMMITTED, call)
    return max(end, plan.returned)


def retry_with_key(turn: Turn, *, honoured: bool = True) -> float:
    """The first request's answer is lost; the tool retries with the same idempotency key. The third party
    de-duplicates it (replayed) or, ignoring the key, creates a second ticket."""
    stream = make_stream(turn, open_turn(turn))
    call = make_call(turn, "create_ticket")
    plan = plan_tool(
        turn, _at_fraction(turn, stream, 0.1, 0.6), call, retry="honoured" if honoured else "ignored"
    )
    schedule_tool(turn, plan)
    if not honoured:
        turn.label(kinds.DUPLICATE_COMMIT, call)
    return max(complete_stream(turn, stream), plan.returned)


# --- the stop-button incidents ---------------------------------------------------------------------


def stop_after_eager_dispatch(turn: Turn, *, stop_token: int = 1200, reaction_ms: float = 500.0) -> float:
    """Eager dispatch: around token 1200 the model calls send_email, create_ticket and kick_off_deploy, all
    dispatched eagerly; the user presses stop half a second late. The email is sent, the ticket exists,
    the deploy runs, nothing is compensated or shown."""
    stream = make_stream(turn, open_turn(turn), total=turn.rng.randint(1700, 2600))
    first = stop_token + turn.rng.randint(-50, 50)
    plans: list[ToolPlan] = []
    for n, name in enumerate(("send_email", "create_ticket", "kick_off_deploy")):
        call = make_call(turn, name, dispatch="eager")
        plans.append(plan_tool(turn, stream.time_of(first + 25 * n), call))
    t_cancel = max(p.returned for p in plans) + lognormal(turn.rng, reaction_ms, 0.3, 150, 1500)
    stream = _stream_covering(stream, t_cancel)
    for plan in plans:
        schedule_tool(turn, plan)
        turn.label(kinds.CANCELLED_BUT_COMMITTED, plan.call)
        if plan.call.tier in ("soft_irreversible", "hard_irreversible"):
            turn.label(kinds.EAGER_SIDE_EFFECT, plan.call)
        if plan.call.needs_approval:
            turn.label(kinds.UNAPPROVED_SIDE_EFFECT, plan.call)
    return schedule_cancel(turn, plan_cancel(turn, t_cancel), stream)


def stop_after_invoice_email(turn: Turn, *, stop_after_commit_ms: float = 200.0) -> float:
    """Invoice email: send_invoice_email fired eagerly and the relay said 250 OK; the user stops 200 ms later.
    The streamed tokens are billed, the email's cost is not, and the transcript never shows it."""
    stream = make_stream(turn, open_turn(turn), median_tokens=700)
    call = make_call(turn, "send_invoice_email", dispatch="eager")
    plan = plan_tool(turn, stream.time_of(turn.rng.randint(20, 80)), call)
    assert plan.commit is not None
    t_cancel = plan.commit + stop_after_commit_ms + turn.rng.uniform(-20.0, 20.0)
    stream = _stream_covering(stream, t_cancel)
    schedule_tool(turn, plan, bill=False)
    for kind in (kinds.EAGER_SIDE_EFFECT, kinds.CANCELLED_BUT_COMMITTED, kinds.UNBILLED_SIDE_EFFECT):
        turn.label(kind, call)
    return max(schedule_cancel(turn, plan_cancel(turn, t_cancel), stream), plan.returned)


def approval_bypassed(turn: Turn) -> float:
    """Approval is requested but the runtime flushes the call without waiting; the grant comes later."""
    stream = make_stream(turn, open_turn(turn))
    call = make_call(turn, turn.rng.choice(["send_sms", "kick_off_deploy"]))
    buffer_call(turn, _at_fraction(turn, stream, 0.3, 0.9), call)
    t_flush = ask_approval(turn, complete_stream(turn, stream) + 0.3, call, granted=True, wait=False)
    plan = plan_tool(turn, t_flush, call)
    schedule_tool(turn, plan)
    turn.label(kinds.UNAPPROVED_SIDE_EFFECT, call)
    return receipt(turn, plan.returned + 0.3, call)


def swallowed_abort_error(turn: Turn) -> float:
    """The runtime catches AbortError and says nothing: it never logs the cancel, generates to the end,
    and bills every token it generated."""
    stream = make_stream(turn, open_turn(turn), median_tokens=900)
    t_cancel = max(stream.start + 200.0, _at_fraction(turn, stream, 0.2, 0.7))
    stream = _stream_covering(stream, t_cancel, margin=800.0)
    schedule_cancel(turn, plan_cancel(turn, t_cancel), stream, reach_runtime=False)
    turn.close(stream.end + 0.5, "chat")
    charge_tokens(turn, stream.end + 1.0, stream.total)
    turn.label(kinds.CANCEL_NOT_PROPAGATED)
    turn.label(kinds.TOKENS_BILLED_AFTER_CANCEL)
    return stream.end + 10.0


def tokens_billed_in_full(turn: Turn) -> float:
    """The cancel propagates, but billing charges the provider's full usage, not what was streamed."""
    stream = make_stream(turn, open_turn(turn), median_tokens=900)
    t_cancel = max(stream.start + 200.0, _at_fraction(turn, stream, 0.2, 0.7))
    stream = _stream_covering(stream, t_cancel, margin=800.0)
    end = schedule_cancel(turn, plan_cancel(turn, t_cancel), stream, bill_tokens=stream.total)
    turn.label(kinds.TOKENS_BILLED_AFTER_CANCEL)
    return end


def cancel_never_acknowledged(turn: Turn) -> float:
    """The client disconnects; every layer hears of it, none reports that its work stopped."""
    stream = make_stream(turn, open_turn(turn))
    t_cancel = max(stream.start + 200.0, _at_fraction(turn, stream, 0.2, 0.9))
    stream = _stream_covering(stream, t_cancel)
    end = schedule_cancel(
        turn, plan_cancel(turn, t_cancel, origin="client_disconnect"), stream, acknowledge=False
    )
    turn.label(kinds.CANCEL_NOT_PROPAGATED)
    return end


def cancel_not_forwarded_to_tool(turn: Turn) -> float:
    """The runtime hears the cancel but never forwards it to the tool call running at the time."""
    stream = make_stream(turn, open_turn(turn), median_tokens=900)
    call = make_call(turn, turn.rng.choice(READ_ONLY_TOOLS))
    plan = plan_tool(
        turn, _at_fraction(turn, stream, 0.05, 0.4), call, work_ms=lognormal(turn.rng, 1500, 0.3, 800, 4000)
    )
    schedule_tool(turn, plan)
    t_cancel = plan.start + (plan.done - plan.start) * turn.rng.uniform(0.1, 0.4)
    stream = _stream_covering(stream, t_cancel)
    end = schedule_cancel(turn, plan_cancel(turn, t_cancel), stream)
    turn.label(kinds.CANCEL_NOT_PROPAGATED)
    return max(end, plan.returned)


def untiered_tool(turn: Turn) -> float:
    """A tool registered without a reversibility tier, dispatched eagerly ("eager when unknown")."""
    stream = make_stream(turn, open_turn(turn))
    call = make_call(turn, "update_crm_record")
    plan = plan_tool(turn, _at_fraction(turn, stream, 0.1, 0.7), call)
    schedule_tool(turn, plan)
    turn.label(kinds.UNTIERED_TOOL, call)
    return max(complete_stream(turn, stream), plan.returned)


def missing_idempotency_key(turn: Turn) -> float:
    """A button-reversible call committed without an idempotency key."""
    stream = make_stream(turn, open_turn(turn))
    call = make_call(turn, turn.rng.choice(["create_ticket", "create_draft"]), keyed=False)
    plan = plan_tool(turn, _at_fraction(turn, stream, 0.1, 0.7), call)
    schedule_tool(turn, plan)
    turn.label(kinds.MISSING_IDEMPOTENCY_KEY, call)
    return max(complete_stream(turn, stream), plan.returned)


def ghost_commit(turn: Turn) -> float:
    """The email relay is slow; the tool gives up at its 5 s budget and reports failure; the relay then
    sends the email and answers 250 OK."""
    stream = make_stream(turn, open_turn(turn))
    call = make_call(turn, "send_email")
    buffer_call(turn, _at_fraction(turn, stream, 0.2, 0.8), call)
    plan = plan_tool(turn, complete_stream(turn, stream) + 0.5, call, fail="timeout")
    schedule_tool(turn, plan)
    turn.label(kinds.GHOST_COMMIT, call)
    assert plan.ack is not None
    return max(plan.returned, plan.ack + 1.0)


def billed_not_committed(turn: Turn) -> float:
    """The invoice email is charged at prepare time; the relay then refuses it, so it never commits."""
    stream = make_stream(turn, open_turn(turn))
    call = make_call(turn, "send_invoice_email")
    buffer_call(turn, _at_fraction(turn, stream, 0.2, 0.8), call)
    plan = plan_tool(turn, complete_stream(turn, stream) + 0.5, call, fail="rejected")
    schedule_tool(turn, plan, charge_at_prepare=True)
    turn.label(kinds.BILLED_NOT_COMMITTED, call)
    return plan.returned


def skewed_node(turn: Turn) -> float:
    """A ticket created through ticketing-2, whose wall clock runs 250 ms behind: its acknowledgement is
    after the tool's prepare by HLC and 250 ms before it by wall clock."""
    stream = make_stream(turn, open_turn(turn))
    call = make_call(turn, "create_ticket")
    plan = plan_tool(
        turn,
        _at_fraction(turn, stream, 0.1, 0.7),
        call,
        third_party="ticketing-2",
        work_ms=lognormal(turn.rng, 60, 0.4, 10, 150),
    )
    schedule_tool(turn, plan)
    turn.label(kinds.CAUSAL_INVERSION)
    return max(complete_stream(turn, stream), plan.returned)


# --- framework-instrumented turns (no turnlens.*, no HLC) ------------------------------------------


GENAI_NODE = "support-bot-1"  # the app instrumented with the GenAI conventions only


def _open_genai_run(turn: Turn) -> None:
    """The GenAI app's agent run, its turn's root span."""
    turn.contract = False
    turn.open(
        0.0,
        "agent",
        GENAI_NODE,
        "invoke_agent support-bot",
        kind=SpanKind.SERVER,
        attributes={
            c.GEN_AI_OPERATION_NAME: "invoke_agent",
            "gen_ai.agent.name": "support-bot",
            c.GEN_AI_CONVERSATION_ID: turn.session.session_id,
        },
    )


def _genai_chat(turn: Turn, key: str, t: float, t_end: float, attributes: dict[str, object]) -> None:
    """A model call of the GenAI app from t to t_end, with its usage and finish reasons."""
    turn.open(
        t,
        key,
        GENAI_NODE,
        "chat gpt-4o-mini",
        parent="agent",
        kind=SpanKind.CLIENT,
        attributes={c.GEN_AI_OPERATION_NAME: "chat", "gen_ai.request.model": "gpt-4o-mini", **attributes},
    )
    turn.close(t_end, key)


def _genai_tool_request(turn: Turn, key: str, t: float) -> float:
    """A model call of the GenAI app from t that asks for a tool; returns when it ended."""
    rng = turn.rng
    t_chat = t + lognormal(rng, 700, 0.4, 100, 4000)
    usage = {
        "gen_ai.usage.input_tokens": rng.randint(200, 3000),
        "gen_ai.usage.output_tokens": rng.randint(10, 80),
    }
    _genai_chat(turn, key, t, t_chat, {**usage, c.FINISH_REASONS: ["tool_calls"]})
    return t_chat


def _open_genai_tool(turn: Turn, key: str, t: float, tool: str, call_id: str) -> None:
    """The GenAI app's span of one tool call, from t."""
    turn.open(
        t,
        key,
        GENAI_NODE,
        f"execute_tool {tool}",
        parent="agent",
        attributes={
            c.GEN_AI_OPERATION_NAME: "execute_tool",
            c.TOOL_NAME: tool,
            c.TOOL_CALL_ID: call_id,
            "gen_ai.tool.type": "function",
        },
    )


def framework_genai(turn: Turn) -> float:
    """A turn from an app instrumented only with the OpenTelemetry GenAI conventions."""
    rng = turn.rng
    _open_genai_run(turn)
    t = 1.0
    for n in range(rng.randint(1, 2)):
        t_chat = _genai_tool_request(turn, f"chat{n}", t)
        t_tool = t_chat + lognormal(rng, 150, 0.5, 10, 2000)
        tool = rng.choice(["lookup_order", "search_docs"])
        _open_genai_tool(turn, f"tool{n}", t_chat + 0.5, tool, turn.call_id())
        turn.close(t_tool, f"tool{n}")
        t = t_tool + 1.0
    t_end = t + lognormal(rng, 2500, 0.5, 200, 15000)
    answer = {"gen_ai.usage.output_tokens": rng.randint(80, 900), c.FINISH_REASONS: ["stop"]}
    _genai_chat(turn, "final", t, t_end, answer)
    return t_end + 1.0


def framework_openinference(turn: Turn) -> float:
    """A turn from an app instrumented only with OpenInference (`openinference.span.kind`, `tool.name`)."""
    turn.contract = False
    node, rng = "research-assistant-1", turn.rng
    turn.open(
        0.0,
        "agent",
        node,
        "ResearchAgent.run",
        attributes={
            c.OPENINFERENCE_SPAN_KIND: "AGENT",
            c.SESSION_ID: turn.session.session_id,
            "input.value": "…",
        },
    )
    t_llm = 1.0 + lognormal(rng, 900, 0.4, 100, 5000)
    turn.open(
        1.0,
        "llm",
        node,
        "ChatCompletion",
        parent="agent",
        attributes={
            c.OPENINFERENCE_SPAN_KIND: "LLM",
            "llm.model_name": "claude-sonnet",
            "llm.token_count.completion": rng.randint(20, 200),
        },
    )
    turn.close(t_llm, "llm")
    t_tool = t_llm + lognormal(rng, 400, 0.5, 20, 3000)
    turn.open(
        t_llm + 0.5,
        "tool",
        node,
        "web_search",
        parent="agent",
        attributes={c.OPENINFERENCE_SPAN_KIND: "TOOL", c.OPENINFERENCE_TOOL_NAME: "web_search"},
    )
    turn.close(t_tool, "tool")
    t_end = t_tool + lognormal(rng, 2000, 0.5, 200, 12000)
    turn.open(
        t_tool + 0.5,
        "llm2",
        node,
        "ChatCompletion",
        parent="agent",
        attributes={
            c.OPENINFERENCE_SPAN_KIND: "LLM",
            "llm.model_name": "claude-sonnet",
            "llm.token_count.completion": rng.randint(80, 900),
        },
    )
    turn.close(t_end, "llm2")
    return t_end + 1.0


def framework_stop_during_tool(turn: Turn) -> float:
    """A GenAI-instrumented app whose user stops while send_email runs: the task awaiting the tool is
    cancelled, its span and the agent run's end with the CancelledError, and whether the e-mail went out is
    unknown."""
    turn.cancelled = True
    _open_genai_run(turn)
    t_chat = _genai_tool_request(turn, "chat", 1.0)
    call = instrument.ToolCall("send_email", turn.call_id(), tier="soft_irreversible")
    _open_genai_tool(turn, "tool", t_chat + 0.5, call.name, call.call_id)
    t_stop = t_chat + 0.5 + lognormal(turn.rng, 400, 0.5, 20, 3000)  # the relay is slow: the user gives up
    turn.exception(t_stop, "tool", "asyncio.exceptions.CancelledError")
    turn.close(t_stop + 0.05, "tool", error="CancelledError")
    turn.exception(t_stop + 0.2, "agent", "asyncio.exceptions.CancelledError")
    turn.close(t_stop + 0.3, "agent", error="CancelledError")
    turn.label(kinds.INTERRUPTED_SIDE_EFFECT, call)
    return t_stop + 1.0


# --- the catalogue --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """A named scenario, the finding kinds its labels contain, and its weight in the default mix."""

    name: str
    play: Callable[[Turn], float]
    kinds: tuple[str, ...]
    weight: float
    framework: bool = False  # a whole session of framework-instrumented turns

    @property
    def description(self) -> str:
        """The playing function's docstring, with the parameters this name binds."""
        play, bound = self.play, ""
        if isinstance(play, partial):
            bound = " (" + ", ".join(f"{k}={v!r}" for k, v in play.keywords.items()) + ")"
            play = play.func
        return " ".join((play.__doc__ or "").split()) + bound


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("clean_chat", clean_chat, (), 10),
        Scenario("clean_read_tools", clean_read_tools, (), 8),
        Scenario("clean_speculative_flush", clean_speculative_flush, (), 5),
        Scenario("approval_granted", partial(approval_flow, granted=True), (), 3),
        Scenario("approval_denied", partial(approval_flow, granted=False), (), 2),
        Scenario("speculative_discarded_on_cancel", speculative_discarded_on_cancel, (), 3),
        Scenario("user_stops_stream", user_stops_stream, (), 5),
        Scenario("stop_after_read_tool", stop_after_read_tool, (), 2),
        Scenario("compensated_on_cancel", compensated_on_cancel, (), 3),
        Scenario("typing_cancel_during_read_tool", partial(typing_cancel, commits=False), (), 3),
        Scenario("retry_key_honoured", partial(retry_with_key, honoured=True), (), 2),
        Scenario("framework_genai", framework_genai, (), 2, framework=True),
        Scenario("framework_openinference", framework_openinference, (), 2, framework=True),
        Scenario(
            "framework_stop_during_tool",
            framework_stop_during_tool,
            (kinds.INTERRUPTED_SIDE_EFFECT,),
            2,
            framework=True,
        ),
        Scenario(
            "stop_after_eager_dispatch",
            stop_after_eager_dispatch,
            (kinds.CANCELLED_BUT_COMMITTED, kinds.EAGER_SIDE_EFFECT, kinds.UNAPPROVED_SIDE_EFFECT),
            2,
        ),
        Scenario(
            "stop_after_invoice_email",
            stop_after_invoice_email,
            (kinds.EAGER_SIDE_EFFECT, kinds.CANCELLED_BUT_COMMITTED, kinds.UNBILLED_SIDE_EFFECT),
            2,
        ),
        Scenario("approval_bypassed", approval_bypassed, (kinds.UNAPPROVED_SIDE_EFFECT,), 1.5),
        Scenario(
            "double_compensation",
            partial(compensated_on_cancel, handler_fires=2, tool="charge_card"),
            (kinds.DUPLICATE_COMPENSATION,),
            1.5,
        ),
        Scenario(
            "typing_cancel_during_commit",
            partial(typing_cancel, commits=True),
            (kinds.CANCELLED_BUT_COMMITTED,),
            2,
        ),
        Scenario(
            "swallowed_abort_error",
            swallowed_abort_error,
            (kinds.CANCEL_NOT_PROPAGATED, kinds.TOKENS_BILLED_AFTER_CANCEL),
            1.5,
        ),
        Scenario("tokens_billed_in_full", tokens_billed_in_full, (kinds.TOKENS_BILLED_AFTER_CANCEL,), 1.5),
        Scenario("cancel_never_acknowledged", cancel_never_acknowledged, (kinds.CANCEL_NOT_PROPAGATED,), 1),
        Scenario(
            "cancel_not_forwarded_to_tool", cancel_not_forwarded_to_tool, (kinds.CANCEL_NOT_PROPAGATED,), 1
        ),
        Scenario(
            "retry_key_ignored", partial(retry_with_key, honoured=False), (kinds.DUPLICATE_COMMIT,), 1.5
        ),
        Scenario("untiered_tool", untiered_tool, (kinds.UNTIERED_TOOL,), 1.5),
        Scenario("missing_idempotency_key", missing_idempotency_key, (kinds.MISSING_IDEMPOTENCY_KEY,), 1.5),
        Scenario("ghost_commit", ghost_commit, (kinds.GHOST_COMMIT,), 1.5),
        Scenario("billed_not_committed", billed_not_committed, (kinds.BILLED_NOT_COMMITTED,), 1.5),
        Scenario("skewed_node", skewed_node, (kinds.CAUSAL_INVERSION,), 1.5),
    )
}
