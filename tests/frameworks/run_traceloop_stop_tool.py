"""Traceloop / OpenLLMetry, the user pressing stop while a tool runs: send_email is a coroutine `@tool` (a
plain function would block the event loop, where no stop can land until it returns) that hands the e-mail to
the relay, then waits for the relay's answer; the user stops half a second into that wait. The program
prints each step."""

from __future__ import annotations

import asyncio
import json

import run_traceloop
import scenario_harness as harness
from openai import AsyncOpenAI
from traceloop.sdk import Traceloop
from traceloop.sdk.decorators import tool, workflow

SESSION = "session-stop"
RELAY = harness.Relay()


@tool(name="send_email")
async def send_email(to: str, body: str) -> str:
    return await RELAY.send(to)


def main() -> None:
    endpoints = harness.parse_endpoints()
    run_traceloop.init(endpoints)
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
        await harness.stop_once(turn(harness.EMAIL), RELAY.handed)

    asyncio.run(stop_while_the_tool_runs())


if __name__ == "__main__":
    main()
