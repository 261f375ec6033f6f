"""Google ADK, the user pressing stop while a tool runs. ADK runs a plain function tool on the event loop,
where no stop can land until it returns, so the tool here is a coroutine, as a tool calling a service would
be: it hands the e-mail to the relay, then waits for the relay's answer, and the user stops half a second into
that wait. The e-mail is out; the run never learns whether it was delivered. The program prints each step."""

from __future__ import annotations

import asyncio

import run_adk
import scenario_harness as harness

SESSION = "session-stop"
RELAY = harness.Relay()


async def send_email(to: str, body: str) -> str:
    """Sends an e-mail."""
    return await RELAY.send(to)


def main() -> None:
    endpoints = harness.parse_endpoints()
    provider = run_adk.tracing(endpoints)
    ask = run_adk.asker(endpoints, tools=[send_email])
    asyncio.run(harness.stop_once(ask(SESSION, harness.EMAIL), RELAY.handed))
    provider.shutdown()


if __name__ == "__main__":
    main()
