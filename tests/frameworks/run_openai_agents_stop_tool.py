"""The OpenAI Agents SDK (OpenInference), the user pressing stop while a tool runs: the e-mail tool takes two
seconds, the client cancels the run after one. The SDK runs a plain function tool in a worker thread;
cancelling the run cancels the task awaiting it, not the thread, which goes on and sends the e-mail. The
program prints when it did."""

from __future__ import annotations

import asyncio
import time

import scenario_harness as harness
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_trace_processors
from openai import AsyncOpenAI
from openinference.instrumentation import using_session
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

SESSION = "session-stop"
TOOL_SECONDS = 2.0  # the user stops after harness.CANCEL_AFTER_S, while the tool runs


@function_tool
def send_email(to: str, body: str) -> str:
    """Sends an e-mail."""
    time.sleep(TOOL_SECONDS)
    print("e-mail sent", flush=True)
    return f"sent to {to}"


def main() -> None:
    endpoints = harness.parse_endpoints()
    provider = harness.tracer_provider(endpoints, "openai-agents-app")
    set_trace_processors([])  # no export to the OpenAI platform: only OpenInference's processor
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    client = AsyncOpenAI(base_url=endpoints.openai, api_key="sk-test")
    agent = Agent(
        name="assistant",
        instructions="Help the user.",
        model=OpenAIChatCompletionsModel(model="mock-model", openai_client=client),
        tools=[send_email],
    )

    async def turn() -> object:
        with using_session(SESSION):
            return (await Runner.run(agent, harness.EMAIL)).final_output

    async def stop_while_the_tool_runs() -> None:
        await harness.cancel_half_way(turn())
        await asyncio.sleep(TOOL_SECONDS)  # the thread finishes the tool meanwhile

    asyncio.run(stop_while_the_tool_runs())
    provider.shutdown()


if __name__ == "__main__":
    main()
