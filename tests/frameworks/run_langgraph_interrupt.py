"""LangGraph (OpenInference) with a tool that asks a person before it acts: `interrupt()` inside send_email,
after some work of its own (longer than the 10 ms under which any tool span without result reads as a pause).
The run pauses with the question; the program answers yes (`Command(resume="yes")`) and the resumed run sends
the e-mail, in a trace of its own."""

from __future__ import annotations

import time

import scenario_harness as harness
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.types import Command, interrupt

SESSION = "session-interrupt"


@tool
def send_email(to: str, body: str) -> str:
    """Sends an e-mail."""
    time.sleep(0.05)  # drafting it
    if interrupt({"question": f"Send the e-mail to {to}?"}) != "yes":
        return "not sent"
    print("e-mail sent", flush=True)
    return f"sent to {to}"


def main(traced: harness.Traced = harness.langgraph_model) -> None:
    """The scenario, its model and spans from `traced` (OpenInference by default)."""
    provider, model = traced(harness.parse_endpoints())
    agent = create_react_agent(model, [send_email], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": SESSION}, "metadata": {"session_id": SESSION}}
    paused = agent.invoke({"messages": [("user", harness.EMAIL)]}, config)
    assert paused.get("__interrupt__"), "the run did not pause"
    done = agent.invoke(Command(resume="yes"), config)
    print("resumed:", done["messages"][-1].content, flush=True)
    provider.shutdown()


if __name__ == "__main__":
    main()
