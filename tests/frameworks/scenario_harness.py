"""What every framework scenario shares: an OTLP/HTTP exporter to a collector, the two sessions a user runs.

A scenario is a small program (one module per framework, run in its own process: each framework installs its
instrumentation process-wide) that defines `Scenario.ask(prompt)` and is driven by `run_sessions`:

- session one: a greeting, a weather question (one `get_weather` tool call), and a request for a long answer
  that the client cancels half-way through the stream, as a user pressing stop would;
- session two: one request that makes the model call `send_email`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

GREETING = "hello there"
WEATHER = "what is the weather in Paris?"
LONG = "write me a long essay about clocks"
EMAIL = "please email the quarterly report to ops"
SESSIONS = (("session-one", (GREETING, WEATHER, LONG)), ("session-two", (EMAIL,)))
CANCEL_AFTER_S = 1.0  # the long answer streams for ~8 s; the user stops it after one


@dataclass
class Endpoints:
    otlp: str  # http://127.0.0.1:PORT of the collector's OTLP/HTTP receiver
    openai: str  # base URL of the mock OpenAI server (ends in /v1)


# How a LangGraph scenario is traced: its endpoints -> (something to shut down at the end, the chat model)
Traced = Callable[[Endpoints], tuple[Any, Any]]


def parse_endpoints() -> Endpoints:
    """The command line's endpoints, once the collector listens (the test starts both at once)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--otlp", required=True)
    parser.add_argument("--openai", required=True)
    args = parser.parse_args()
    os.environ["OPENAI_API_KEY"] = "sk-test"
    os.environ["OPENAI_BASE_URL"] = args.openai
    wait_for_port(args.otlp)
    return Endpoints(otlp=args.otlp, openai=args.openai)


def wait_for_port(url: str, timeout_s: float = 90.0) -> None:
    """Blocks until something accepts connections at the URL's host and port."""
    parts = urlsplit(url)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


# The two tools as the OpenAI chat API declares them (the scenarios that call the SDK themselves).
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": name.replace("_", " "),
            "parameters": {"type": "object", "properties": {}},
        },
    }
    for name in ("get_weather", "send_email")
]


def _pydantic_assistant(endpoints: Endpoints) -> Any:
    """A pydantic-ai agent on the mock OpenAI server, without tools (imported here only when a pydantic-ai or
    Logfire scenario runs)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=endpoints.openai, api_key="sk-test")
    return Agent(OpenAIChatModel("mock-model", provider=provider), name="assistant")


def pydantic_agent(endpoints: Endpoints) -> Any:
    """A pydantic-ai agent on the mock OpenAI server with the two tools (the pydantic-ai and Logfire
    scenarios)."""
    agent = _pydantic_assistant(endpoints)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    @agent.tool_plain
    def send_email(to: str, body: str) -> str:
        """Sends an e-mail."""
        return f"sent to {to}"

    return agent


def slow_email_agent(endpoints: Endpoints, seconds: float) -> Any:
    """A pydantic-ai agent whose one tool, send_email, takes `seconds` in the worker thread pydantic-ai runs a
    plain function tool in, then prints "e-mail sent" (the stop scenarios: the thread outlives the stop)."""
    agent = _pydantic_assistant(endpoints)

    @agent.tool_plain
    def send_email(to: str, body: str) -> str:
        """Sends an e-mail."""
        time.sleep(seconds)
        print("e-mail sent", flush=True)
        return f"sent to {to}"

    return agent


async def ask_pydantic_agent(agent: Any, prompt: str) -> object:
    """One turn of a pydantic-ai agent: LONG streamed (so it can be cancelled half-way), the others run."""
    if prompt == LONG:
        async with agent.run_stream(prompt) as result:
            async for _ in result.stream_text(delta=True):
                pass
        return None
    return (await agent.run(prompt)).output


def openai_agents_model(endpoints: Endpoints) -> tuple[TracerProvider, Any]:
    """The OpenAI Agents SDK traced by OpenInference into the collector (no export to the OpenAI platform),
    and its chat-completions model on the mock server (the OpenAI Agents scenarios; imported here only when
    one of them runs)."""
    from agents import OpenAIChatCompletionsModel, set_trace_processors
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    provider = tracer_provider(endpoints, "openai-agents-app")
    set_trace_processors([])  # only OpenInference's processor
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    client = AsyncOpenAI(base_url=endpoints.openai, api_key="sk-test")
    return provider, OpenAIChatCompletionsModel(model="mock-model", openai_client=client)


def langgraph_model(endpoints: Endpoints) -> tuple[TracerProvider, Any]:
    """LangChain traced by OpenInference into the collector, and its OpenAI chat model on the mock server (the
    LangGraph scenarios; imported here only when one of them runs)."""
    from langchain_openai import ChatOpenAI
    from openinference.instrumentation.langchain import LangChainInstrumentor

    provider = tracer_provider(endpoints, "langgraph-app")
    LangChainInstrumentor().instrument(tracer_provider=provider)
    model = ChatOpenAI(model="mock-model", base_url=endpoints.openai, api_key="sk-test", stream_usage=True)
    return provider, model


def langsmith_model(endpoints: Endpoints) -> tuple[TracerProvider, Any]:
    """LangChain traced by LangSmith's own OpenTelemetry export into the collector (no OpenInference), and the
    same OpenAI chat model: LangSmith writes each run as a span of the global tracer provider, and with
    LANGSMITH_OTEL_ONLY sends nothing to its own API."""
    from langchain_openai import ChatOpenAI
    from opentelemetry import trace

    os.environ.update(LANGSMITH_TRACING="true", LANGSMITH_OTEL_ENABLED="true", LANGSMITH_OTEL_ONLY="true")
    provider = tracer_provider(endpoints, "langsmith-app")
    trace.set_tracer_provider(provider)
    model = ChatOpenAI(model="mock-model", base_url=endpoints.openai, api_key="sk-test", stream_usage=True)
    return _LangSmithFlushed(provider), model


def traceloop_init(endpoints: Endpoints, app_name: str, instrument: str) -> None:
    """Traceloop (OpenLLMetry) exporting to the collector only, each span as it ends, with the one
    instrumentation named (`Instruments.OPENAI`, `Instruments.LANGCHAIN`, ...: its member's name)."""
    from traceloop.sdk import Traceloop
    from traceloop.sdk.instruments import Instruments

    Traceloop.init(
        app_name=app_name,
        exporter=OTLPSpanExporter(endpoint=f"{endpoints.otlp}/v1/traces"),
        disable_batch=True,
        telemetry_enabled=False,
        instruments={Instruments[instrument]},
    )


def traceloop_langchain_model(endpoints: Endpoints) -> tuple[Any, Any]:
    """LangChain traced by Traceloop's LangChain instrumentation into the collector, and the same OpenAI chat
    model: the run's metadata becomes Traceloop's association properties."""
    from langchain_openai import ChatOpenAI

    traceloop_init(endpoints, "traceloop-langgraph-app", "LANGCHAIN")
    model = ChatOpenAI(model="mock-model", base_url=endpoints.openai, api_key="sk-test", stream_usage=True)
    return _TraceloopFlushed(), model


class _TraceloopFlushed:
    """Traceloop owns its tracer provider and, without batching, exports each span as it ends: nothing is left
    to flush at shutdown."""

    def shutdown(self) -> None:
        pass


class _LangSmithFlushed:
    """A tracer provider whose shutdown first waits for LangSmith's background thread, which ends a run's span
    after the run returned."""

    def __init__(self, provider: TracerProvider) -> None:
        self._provider = provider

    def shutdown(self) -> None:
        from langchain_core.tracers.langchain import wait_for_all_tracers

        wait_for_all_tracers()
        self._provider.shutdown()


def tracer_provider(endpoints: Endpoints, service: str) -> TracerProvider:
    """The standard OTLP/HTTP span exporter, exporting each span as it ends (no batching to wait for)."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(endpoint=f"{endpoints.otlp}/v1/traces")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


async def cancel_half_way(answer: Awaitable[object]) -> None:
    """Runs a streamed answer and cancels it after CANCEL_AFTER_S, as a client closing the stream."""
    task = asyncio.ensure_future(answer)
    await asyncio.sleep(CANCEL_AFTER_S)
    await _cancel(task)


async def _cancel(task: asyncio.Future[object]) -> None:
    """Cancels a turn still under way, as the user's stop: one that already finished is a broken scenario."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the turn finished before the user stopped it")


class Relay:
    """A mail relay a coroutine tool hands the e-mail to, then waits `answer_s` for its answer: the stop
    scenarios of the frameworks whose tools run on the event loop (a stop lands only where a coroutine
    awaits)."""

    def __init__(self, answer_s: float = 2.0) -> None:
        self.answer_s = answer_s
        self.handed = threading.Event()

    async def send(self, to: str) -> str:
        await asyncio.sleep(0.2)  # the request to the relay
        print("e-mail handed to the relay", flush=True)
        self.handed.set()
        await asyncio.sleep(self.answer_s)  # the relay's answer, which the user does not wait for
        return f"sent to {to}"


async def stop_once(answer: Awaitable[object], ready: threading.Event, after_s: float = 0.5) -> None:
    """Runs a turn and cancels it `after_s` after `ready` is set, as a user pressing stop: a fixed wait from
    the start would miss the tool when a framework's first model call is slow (LiteLLM's is)."""
    task = asyncio.ensure_future(answer)
    while not ready.is_set() and not task.done():
        await asyncio.sleep(0.05)
    await asyncio.sleep(after_s)
    print("stop", flush=True)
    await _cancel(task)


Ask = Callable[[str, str], Awaitable[object]]  # (session id, prompt) -> answer; streamed for LONG


async def run_sessions(ask: Ask) -> None:
    """The two sessions, turn after turn; the long answer is cancelled half-way."""
    for session, prompts in SESSIONS:
        for prompt in prompts:
            if prompt == LONG:
                await cancel_half_way(ask(session, prompt))
            else:
                await ask(session, prompt)
