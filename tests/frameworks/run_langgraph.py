"""LangGraph's prebuilt ReAct agent on langchain-openai, traced by `openinference-instrumentation-langchain`.

The session is LangGraph's thread: the `thread_id` (and `session_id`) of the run's config metadata, which the
OpenInference instrumentation writes as `session.id`.
"""

from __future__ import annotations

import asyncio

import scenario_harness as harness
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def send_email(to: str, body: str) -> str:
    """Sends an e-mail."""
    return f"sent to {to}"


def main(traced: harness.Traced = harness.langgraph_model) -> None:
    """The scenario, its model and spans from `traced` (OpenInference by default)."""
    provider, model = traced(harness.parse_endpoints())
    agent = create_react_agent(model, [get_weather, send_email])

    async def ask(session: str, prompt: str) -> object:
        config = {"configurable": {"thread_id": session}, "metadata": {"session_id": session}}
        inputs = {"messages": [("user", prompt)]}
        if prompt == harness.LONG:
            async for _ in agent.astream(inputs, config, stream_mode="messages"):
                pass
            return None
        return await agent.ainvoke(inputs, config)

    asyncio.run(harness.run_sessions(ask))
    provider.shutdown()


if __name__ == "__main__":
    main()
