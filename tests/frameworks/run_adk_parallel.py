"""Google ADK with a model answer that asks for two tool calls at once: ADK runs them in parallel, each in
its own `execute_tool` span, and records the batch in one more span (`execute_tool (merged)`)."""

from __future__ import annotations

import asyncio

import run_adk
import scenario_harness as harness

SESSION = "session-parallel"
PROMPT = "what is the weather in Paris? then email it to ops"  # the mock asks for both tools in one answer


def main() -> None:
    provider, ask = run_adk.start(harness.parse_endpoints())
    asyncio.run(ask(SESSION, PROMPT))
    provider.shutdown()


if __name__ == "__main__":
    main()
