"""Google ADK beyond the shared scenario: a model answer that asks for two tool calls at once, which ADK runs
in parallel (each in its own `execute_tool` span, then one more span for the batch, `execute_tool (merged)`),
and an agent that hands the user over to a sub-agent through ADK's `transfer_to_agent` tool."""

from __future__ import annotations

import asyncio

import run_adk
import scenario_harness as harness

PARALLEL = ("session-parallel", "what is the weather in Paris? then email it to ops")  # two tools, one answer
HANDOFF = ("session-handoff", "let the mailer send the quarterly report to ops")


def main() -> None:
    endpoints = harness.parse_endpoints()
    provider = run_adk.tracing(endpoints)
    asyncio.run(run_adk.asker(endpoints)(*PARALLEL))
    asyncio.run(run_adk.asker(endpoints, handoff=True)(*HANDOFF))
    provider.shutdown()


if __name__ == "__main__":
    main()
