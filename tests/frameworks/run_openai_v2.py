"""The OpenAI SDK instrumented by `opentelemetry-instrumentation-openai-v2` (OTel GenAI conventions).

The SDK has no agent loop: the application runs it, as the OpenAI docs show, and wraps each turn and each tool
run in spans of its own named by the GenAI conventions (`invoke_agent`, `execute_tool` with the call id).
"""

from __future__ import annotations

import asyncio
import json

import scenario_harness as harness
from openai import AsyncOpenAI
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

TOOLS = harness.OPENAI_TOOLS


def main() -> None:
    endpoints = harness.parse_endpoints()
    provider = harness.tracer_provider(endpoints, "openai-sdk-app")
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("app")
    client = AsyncOpenAI(base_url=endpoints.openai, api_key="sk-test")

    async def ask(session: str, prompt: str) -> object:
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "assistant",
            "gen_ai.conversation.id": session,
        }
        with tracer.start_as_current_span("invoke_agent assistant", attributes=attributes):
            messages: list[dict] = [{"role": "user", "content": prompt}]
            if prompt == harness.LONG:
                stream = await client.chat.completions.create(
                    model="mock-model", messages=messages, stream=True, stream_options={"include_usage": True}
                )
                async for _ in stream:  # cancelled here: the task's CancelledError ends the read
                    pass
                return None
            while True:
                reply = await client.chat.completions.create(
                    model="mock-model", messages=messages, tools=TOOLS
                )
                message = reply.choices[0].message
                if not message.tool_calls:
                    return message.content
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls:
                    with tracer.start_as_current_span(
                        f"execute_tool {call.function.name}",
                        attributes={
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": call.function.name,
                            "gen_ai.tool.call.id": call.id,
                        },
                    ):
                        result = json.dumps({"ok": True})
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    asyncio.run(harness.run_sessions(ask))
    provider.shutdown()


if __name__ == "__main__":
    main()
