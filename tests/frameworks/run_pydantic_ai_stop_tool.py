"""pydantic-ai, the user pressing stop while a tool runs: the e-mail tool takes two seconds, the client
cancels the turn after one. pydantic-ai runs a plain function tool in a worker thread; cancelling the run
cancels the task awaiting it, not the thread, which goes on and sends the e-mail. The program prints when it
did."""

from __future__ import annotations

import asyncio

import scenario_harness as harness
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings

SESSION = "session-stop"
TOOL_SECONDS = 2.0  # the user stops after harness.CANCEL_AFTER_S, while the tool runs


def main() -> None:
    endpoints = harness.parse_endpoints()
    provider = harness.tracer_provider(endpoints, "pydantic-ai-app")
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    agent = harness.slow_email_agent(endpoints, TOOL_SECONDS)

    async def turn() -> object:
        tracer = provider.get_tracer("app")
        with tracer.start_as_current_span("chat turn", attributes={"session.id": SESSION}):
            return (await agent.run(harness.EMAIL)).output

    async def stop_while_the_tool_runs() -> None:
        await harness.cancel_half_way(turn())
        await asyncio.sleep(TOOL_SECONDS)  # the thread finishes the tool meanwhile

    asyncio.run(stop_while_the_tool_runs())
    provider.shutdown()


if __name__ == "__main__":
    main()
