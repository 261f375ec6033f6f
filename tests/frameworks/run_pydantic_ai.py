"""pydantic-ai with `Agent.instrument_all()`: its own GenAI spans, exported over OTLP/HTTP."""

from __future__ import annotations

import asyncio

import scenario_harness as harness
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings


def main() -> None:
    endpoints = harness.parse_endpoints()
    provider = harness.tracer_provider(endpoints, "pydantic-ai-app")
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    agent = harness.pydantic_agent(endpoints)

    async def ask(session: str, prompt: str) -> object:
        # pydantic-ai stamps no session: the application names it, as the docs ask (turnlens reads session.id)
        with provider.get_tracer("app").start_as_current_span(
            "chat turn", attributes={"session.id": session}
        ):
            return await harness.ask_pydantic_agent(agent, prompt)

    asyncio.run(harness.run_sessions(ask))
    provider.shutdown()


if __name__ == "__main__":
    main()
