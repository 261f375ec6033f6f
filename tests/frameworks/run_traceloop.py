"""Traceloop / OpenLLMetry: `Traceloop.init` with its OpenAI instrumentation, the application's turn as a
`@workflow` and its tools as `@tool`, the session as the association property `session_id`."""

from __future__ import annotations

import asyncio
import json

import scenario_harness as harness
from openai import AsyncOpenAI
from traceloop.sdk import Traceloop
from traceloop.sdk.decorators import tool, workflow

TOOLS = harness.OPENAI_TOOLS


@tool(name="get_weather")
def get_weather(city: str) -> str:
    return f"sunny in {city}"


@tool(name="send_email")
def send_email(to: str, body: str) -> str:
    return f"sent to {to}"


def init(endpoints: harness.Endpoints) -> None:
    """Traceloop with its OpenAI instrumentation (the Traceloop scenarios)."""
    harness.traceloop_init(endpoints, "traceloop-app", "OPENAI")


def main() -> None:
    endpoints = harness.parse_endpoints()
    init(endpoints)
    client = AsyncOpenAI(base_url=endpoints.openai, api_key="sk-test")
    run_tool = {"get_weather": get_weather, "send_email": send_email}

    @workflow(name="chat_turn")
    async def turn(prompt: str) -> object:
        messages: list[dict] = [{"role": "user", "content": prompt}]
        if prompt == harness.LONG:
            stream = await client.chat.completions.create(
                model="mock-model", messages=messages, stream=True, stream_options={"include_usage": True}
            )
            async for _ in stream:  # cancelled here: the task's CancelledError ends the read
                pass
            return None
        while True:
            reply = await client.chat.completions.create(model="mock-model", messages=messages, tools=TOOLS)
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = run_tool[call.function.name](**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    async def ask(session: str, prompt: str) -> object:
        Traceloop.set_association_properties({"session_id": session})
        return await turn(prompt)

    asyncio.run(harness.run_sessions(ask))


if __name__ == "__main__":
    main()
