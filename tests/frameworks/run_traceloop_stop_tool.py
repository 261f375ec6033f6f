"""Traceloop / OpenLLMetry, the user pressing stop while a tool runs: send_email is a coroutine `@tool` (a
plain function would block the event loop, where no stop can land until it returns) that hands the e-mail to
the relay, then waits for the relay's answer; the user stops half a second into that wait. The program
prints each step."""

from __future__ import annotations

import asyncio
import json
import threading

import scenario_harness as harness
from openai import AsyncOpenAI
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from traceloop.sdk import Traceloop
from traceloop.sdk.decorators import tool, workflow
from traceloop.sdk.instruments import Instruments

SESSION = "session-stop"
STOP_AFTER_S = 0.5  # into the wait for the relay's answer
OUT = threading.Event()  # the e-mail is with the relay


@tool(name="send_email")
async def send_email(to: str, body: str) -> str:
    await asyncio.sleep(0.2)  # the request to the relay
    print("e-mail handed to the relay", flush=True)
    OUT.set()
    await asyncio.sleep(2.0)  # the relay's answer, which the user does not wait for
    return f"sent to {to}"


def main() -> None:
    endpoints = harness.parse_endpoints()
    Traceloop.init(
        app_name="traceloop-app",
        exporter=OTLPSpanExporter(endpoint=f"{endpoints.otlp}/v1/traces"),
        disable_batch=True,
        telemetry_enabled=False,
        instruments={Instruments.OPENAI},
    )
    client = AsyncOpenAI(base_url=endpoints.openai, api_key="sk-test")

    @workflow(name="chat_turn")
    async def turn(prompt: str) -> object:
        messages: list[dict] = [{"role": "user", "content": prompt}]
        while True:
            reply = await client.chat.completions.create(
                model="mock-model", messages=messages, tools=harness.OPENAI_TOOLS
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = await send_email(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    async def stop_while_the_tool_runs() -> None:
        Traceloop.set_association_properties({"session_id": SESSION})
        task = asyncio.ensure_future(turn(harness.EMAIL))
        while not OUT.is_set() and not task.done():
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


if __name__ == "__main__":
    main()
