"""Logfire with pydantic-ai, the user pressing stop while a tool runs: the e-mail tool takes two seconds, the
client cancels the turn after one. pydantic-ai runs a plain function tool in a worker thread, which goes on
and sends the e-mail after the stop. The program prints when it did."""

from __future__ import annotations

import asyncio

import logfire
import run_logfire
import scenario_harness as harness

SESSION = "session-stop"
TOOL_SECONDS = 2.0  # the user stops after harness.CANCEL_AFTER_S, while the tool runs


def main() -> None:
    endpoints = harness.parse_endpoints()
    run_logfire.configure(endpoints)
    agent = harness.slow_email_agent(endpoints, TOOL_SECONDS)

    async def turn() -> object:
        with logfire.set_baggage(session_id=SESSION):
            with logfire.span("user asked {prompt}", prompt=harness.EMAIL):
                return (await agent.run(harness.EMAIL)).output

    async def stop_while_the_tool_runs() -> None:
        await harness.cancel_half_way(turn())
        await asyncio.sleep(TOOL_SECONDS)  # the thread finishes the tool meanwhile

    asyncio.run(stop_while_the_tool_runs())
    logfire.shutdown()


if __name__ == "__main__":
    main()
