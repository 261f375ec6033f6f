"""Google ADK, the user pressing stop while a tool runs. ADK runs a plain function tool on the event loop,
where no stop can land until it returns, so the tool here is a coroutine, as a tool calling a service would
be: it hands the e-mail to the relay, then waits for the relay's answer, and the user stops half a second into
that wait. The e-mail is out; the run never learns whether it was delivered. The program prints each step."""

from __future__ import annotations

import asyncio
import threading

import run_adk
import scenario_harness as harness

SESSION = "session-stop"
STOP_AFTER_S = 0.5  # into the wait for the relay's answer
OUT = threading.Event()  # the e-mail is with the relay


async def send_email(to: str, body: str) -> str:
    """Sends an e-mail."""
    await asyncio.sleep(0.2)  # the request to the relay
    print("e-mail handed to the relay", flush=True)
    OUT.set()
    await asyncio.sleep(2.0)  # the relay's answer, which the user does not wait for
    return f"sent to {to}"


def main() -> None:
    endpoints = harness.parse_endpoints()
    provider = run_adk.tracing(endpoints)
    ask = run_adk.asker(endpoints, tools=[send_email])

    async def stop_while_the_tool_runs() -> None:
        task = asyncio.ensure_future(ask(SESSION, harness.EMAIL))
        while not OUT.is_set() and not task.done():  # LiteLLM's first model call can take a while
            await asyncio.sleep(0.05)
        await asyncio.sleep(STOP_AFTER_S)
        print("stop", flush=True)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the turn finished before the user stopped it")

    asyncio.run(stop_while_the_tool_runs())
    provider.shutdown()


if __name__ == "__main__":
    main()
