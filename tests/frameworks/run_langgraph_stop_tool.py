"""LangGraph (traced by OpenInference unless `main` is given another tracing), the user pressing stop while
a tool runs, in two sessions.

- session-thread: send_email is a plain function, which LangGraph runs in a worker thread; it takes two
  seconds, and the client cancels the turn after one. Cancelling the run cancels the task awaiting the
  thread, not the thread, which goes on and sends the e-mail.
- session-coroutine: send_email is a coroutine that hands the e-mail to the relay, then waits for its answer;
  the user stops half a second into that wait, and the coroutine is cancelled there.

The program prints each step."""

from __future__ import annotations

import asyncio
import time

import scenario_harness as harness
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

TOOL_SECONDS = 2.0  # the user stops after harness.CANCEL_AFTER_S, while the thread runs the tool
RELAY = harness.Relay()


@tool("send_email")
def send_email_in_thread(to: str, body: str) -> str:
    """Sends an e-mail."""
    time.sleep(TOOL_SECONDS)
    print("e-mail sent", flush=True)
    return f"sent to {to}"


@tool("send_email")
async def send_email_on_the_loop(to: str, body: str) -> str:
    """Sends an e-mail."""
    return await RELAY.send(to)


def main(traced: harness.Traced = harness.langgraph_model) -> None:
    """The scenario, its model and spans from `traced` (OpenInference by default)."""
    provider, model = traced(harness.parse_endpoints())

    def ask(tools: list, session: str) -> object:
        agent = create_react_agent(model, tools)
        return agent.ainvoke({"messages": [("user", harness.EMAIL)]}, {"metadata": {"session_id": session}})

    async def stop_while_the_tools_run() -> None:
        await harness.cancel_half_way(ask([send_email_in_thread], "session-thread"))
        await asyncio.sleep(TOOL_SECONDS)  # the thread finishes the tool meanwhile
        await harness.stop_once(ask([send_email_on_the_loop], "session-coroutine"), RELAY.handed)

    asyncio.run(stop_while_the_tools_run())
    provider.shutdown()


if __name__ == "__main__":
    main()
