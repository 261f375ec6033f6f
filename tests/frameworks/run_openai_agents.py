"""The OpenAI Agents SDK traced by `openinference-instrumentation-openai-agents`.

Each session's turns run inside one `with trace(..., group_id=session)`, as the SDK's docs show for a
conversation: one trace, several runs, each run a turn. OpenInference's `using_session` names
the session.
"""

from __future__ import annotations

import asyncio

import scenario_harness as harness
from agents import Agent, Runner, function_tool, trace
from openinference.instrumentation import using_session


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@function_tool
def send_email(to: str, body: str) -> str:
    """Sends an e-mail."""
    return f"sent to {to}"


def main() -> None:
    provider, model = harness.openai_agents_model(harness.parse_endpoints())
    tools = [get_weather, send_email]
    agent = Agent(name="assistant", instructions="Help the user.", model=model, tools=tools)

    async def ask(session: str, prompt: str) -> object:
        if prompt == harness.LONG:
            result = Runner.run_streamed(agent, prompt)
            async for _ in result.stream_events():
                pass
            return None
        return (await Runner.run(agent, prompt)).final_output

    async def sessions() -> None:
        for session, prompts in harness.SESSIONS:
            # the SDK's group_id is not exported as a session: OpenInference's using_session names it
            with using_session(session), trace("conversation", group_id=session):
                for prompt in prompts:
                    if prompt == harness.LONG:
                        await harness.cancel_half_way(ask(session, prompt))
                    else:
                        await ask(session, prompt)

    asyncio.run(sessions())
    provider.shutdown()


if __name__ == "__main__":
    main()
