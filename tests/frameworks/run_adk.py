"""Google's Agent Development Kit (ADK): its own OpenTelemetry spans, exported over OTLP/HTTP.

ADK traces through the global tracer provider (`gcp.vertex.agent`) with no instrumentor to install: the
application sets its provider, as ADK's docs show for any OTLP backend. The model is LiteLLM's OpenAI client
on the mock server (ADK's `LiteLlm`), and each harness session is an ADK session of the same id, which ADK
writes as `gen_ai.conversation.id`. This program runs in its own environment (ADK pins an older
OpenTelemetry than the project's; `make adk` builds it).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import scenario_harness as harness
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def send_email(to: str, body: str) -> str:
    """Sends an e-mail."""
    return f"sent to {to}"


def tracing(endpoints: harness.Endpoints) -> TracerProvider:
    """The provider exporting to the collector, set as the global one ADK traces with (before any run)."""
    # LiteLLM fetches its model price list from GitHub when imported; offline, it reads its bundled copy
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    provider = harness.tracer_provider(endpoints, "adk-app")
    trace.set_tracer_provider(provider)
    return provider


def runner(endpoints: harness.Endpoints, *, handoff: bool = False, tools: list[Any] | None = None) -> Any:
    """ADK's in-memory runner of the agent on the mock model. The agent has both tools (or `tools`); with
    `handoff`, it has none and hands the user over to a sub-agent, `mailer`, which has `send_email`."""
    # imported here, after tracing(): LiteLLM reads its variable when ADK imports it
    from google.adk.agents import LlmAgent
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.runners import InMemoryRunner

    model = LiteLlm(model="openai/mock-model", api_base=endpoints.openai, api_key="sk-test")
    if handoff:
        mailer = LlmAgent(name="mailer", description="Sends e-mail.", model=model, tools=[send_email])
        agent = LlmAgent(
            name="assistant", instruction="Hand the user over.", model=model, sub_agents=[mailer]
        )
    else:
        agent = LlmAgent(
            name="assistant",
            instruction="Help the user.",
            model=model,
            tools=tools or [get_weather, send_email],
        )
    return InMemoryRunner(agent=agent, app_name="adk-app")


def asker(
    endpoints: harness.Endpoints, *, handoff: bool = False, tools: list[Any] | None = None
) -> harness.Ask:
    """`ask(session, prompt)`: one ADK run of the agent (`runner`) on the mock model, streamed for the long
    answer, so that it can be cancelled half-way."""
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.genai import types

    adk = runner(endpoints, handoff=handoff, tools=tools)
    sessions: set[str] = set()

    async def ask(session: str, prompt: str) -> object:
        if session not in sessions:
            await adk.session_service.create_session(app_name="adk-app", user_id="user", session_id=session)
            sessions.add(session)
        streaming = StreamingMode.SSE if prompt == harness.LONG else StreamingMode.NONE
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        config = RunConfig(streaming_mode=streaming)
        async for _ in adk.run_async(
            user_id="user", session_id=session, new_message=message, run_config=config
        ):
            pass
        return None

    return ask


def main() -> None:
    endpoints = harness.parse_endpoints()
    provider = tracing(endpoints)
    asyncio.run(harness.run_sessions(asker(endpoints)))
    provider.shutdown()


if __name__ == "__main__":
    main()
