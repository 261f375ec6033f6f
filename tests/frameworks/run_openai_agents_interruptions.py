"""The OpenAI Agents SDK (OpenInference), a run interrupted during a tool call, both ways:

- session-stop: the user presses stop while the e-mail tool runs (two seconds; the client cancels the run
  after one). The SDK runs a plain function tool in a worker thread; cancelling the run cancels the task
  awaiting it, not the thread, which goes on and sends the e-mail. The program prints when it did.
- session-coroutine: send_email is a coroutine that hands the e-mail to the relay, then waits for its answer;
  the user stops half a second into that wait, and the coroutine is cancelled there.
- session-approval: the tool needs approval (`needs_approval=True`): the run pauses with an interruption, the
  program approves it and resumes the run, which sends the e-mail. The resumed run is wrapped in the SDK's
  `trace(...)`: OpenInference exports no span of a run resumed without one.
"""

from __future__ import annotations

import asyncio
import time

import scenario_harness as harness
from agents import Agent, Runner, function_tool, trace
from openinference.instrumentation import using_session

TOOL_SECONDS = 2.0  # the user stops after harness.CANCEL_AFTER_S, while the tool runs
RELAY = harness.Relay()


def send_email(to: str, body: str) -> str:
    """Sends an e-mail."""
    time.sleep(TOOL_SECONDS)
    print("e-mail sent", flush=True)
    return f"sent to {to}"


async def send_email_on_the_loop(to: str, body: str) -> str:
    """Sends an e-mail."""
    return await RELAY.send(to)


def main() -> None:
    provider, model = harness.openai_agents_model(harness.parse_endpoints())

    def agent(needs_approval: bool, tool: object = send_email) -> Agent:
        tools = [function_tool(tool, name_override="send_email", needs_approval=needs_approval)]
        return Agent(name="assistant", instructions="Help the user.", model=model, tools=tools)

    async def stopped() -> None:
        async def turn() -> object:
            with using_session("session-stop"):
                return (await Runner.run(agent(False), harness.EMAIL)).final_output

        await harness.cancel_half_way(turn())
        await asyncio.sleep(TOOL_SECONDS)  # the thread finishes the tool meanwhile

        async def on_the_loop() -> object:
            with using_session("session-coroutine"):
                return (await Runner.run(agent(False, send_email_on_the_loop), harness.EMAIL)).final_output

        await harness.stop_once(on_the_loop(), RELAY.handed)

    async def approved() -> None:
        approving = agent(True)
        with using_session("session-approval"):
            paused = await Runner.run(approving, harness.EMAIL)
            assert paused.interruptions, "the run did not pause for approval"
            state = paused.to_state()
            for request in paused.interruptions:
                state.approve(request)
            with trace("resumed run"):
                resumed = await Runner.run(approving, state)
            print("resumed:", resumed.final_output, flush=True)

    async def both() -> None:  # one event loop: the client's connections belong to it
        await stopped()
        await approved()

    asyncio.run(both())
    provider.shutdown()


if __name__ == "__main__":
    main()
