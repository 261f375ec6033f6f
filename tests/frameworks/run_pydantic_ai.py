"""pydantic-ai with `Agent.instrument_all()`: its own GenAI spans, exported over OTLP/HTTP."""

from __future__ import annotations

import asyncio

import scenario_harness as harness
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


def main() -> None:
    endpoints = harness.parse_endpoints()
    provider = harness.tracer_provider(endpoints, "pydantic-ai-app")
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    model = OpenAIChatModel(
        "mock-model", provider=OpenAIProvider(base_url=endpoints.openai, api_key="sk-test")
    )
    agent = Agent(model, name="assistant")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    @agent.tool_plain
    def send_email(to: str, body: str) -> str:
        """Sends an e-mail."""
        return f"sent to {to}"

    async def ask(session: str, prompt: str) -> object:
        # pydantic-ai stamps no session: the application names it, as the docs ask (turnlens reads session.id)
        with provider.get_tracer("app").start_as_current_span(
            "chat turn", attributes={"session.id": session}
        ):
            if prompt == harness.LONG:
                async with agent.run_stream(prompt) as result:
                    async for _ in result.stream_text(delta=True):
                        pass
                return None
            return (await agent.run(prompt)).output

    asyncio.run(harness.run_sessions(ask))
    provider.shutdown()


if __name__ == "__main__":
    main()
