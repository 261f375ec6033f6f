"""LangGraph (OpenInference), the user pressing stop while a tool runs: the e-mail tool takes two seconds, the
client cancels the turn after one. LangGraph runs a plain function tool in a worker thread; cancelling the run
cancels the task awaiting it, not the thread, which goes on and sends the e-mail. The program prints when it
did."""

from __future__ import annotations

import asyncio
import time

import scenario_harness as harness
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

SESSION = "session-stop"
TOOL_SECONDS = 2.0  # the user stops after harness.CANCEL_AFTER_S, while the tool runs


@tool
def send_email(to: str, body: str) -> str:
    """Sends an e-mail."""
    time.sleep(TOOL_SECONDS)
    print("e-mail sent", flush=True)
    return f"sent to {to}"


def main() -> None:
    provider, model = harness.langgraph_model(harness.parse_endpoints())
    agent = create_react_agent(model, [send_email])
    config = {"metadata": {"session_id": SESSION}}

    async def stop_while_the_tool_runs() -> None:
        await harness.cancel_half_way(agent.ainvoke({"messages": [("user", harness.EMAIL)]}, config))
        await asyncio.sleep(TOOL_SECONDS)  # the thread finishes the tool meanwhile

    asyncio.run(stop_while_the_tool_runs())
    provider.shutdown()


if __name__ == "__main__":
    main()
