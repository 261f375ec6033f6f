"""Logfire's SDK sending to turnlens over OTLP/HTTP (not to Logfire's service), with
`logfire.instrument_pydantic_ai()` and the session as Logfire's documented baggage `session_id`."""

from __future__ import annotations

import asyncio

import logfire
import scenario_harness as harness
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


def keep_session_id(match: logfire.ScrubMatch) -> object:
    """Logfire scrubs every attribute whose name says "session"; the session id is no secret here."""
    if match.path == ("attributes", "session_id"):
        return match.value
    return None


def main() -> None:
    endpoints = harness.parse_endpoints()
    logfire.configure(
        send_to_logfire=False,
        service_name="logfire-app",
        console=False,
        scrubbing=logfire.ScrubbingOptions(callback=keep_session_id),
        additional_span_processors=[
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoints.otlp}/v1/traces"))
        ],
    )
    logfire.instrument_pydantic_ai()
    provider = OpenAIProvider(base_url=endpoints.openai, api_key="sk-test")
    agent = Agent(OpenAIChatModel("mock-model", provider=provider), name="assistant")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    @agent.tool_plain
    def send_email(to: str, body: str) -> str:
        """Sends an e-mail."""
        return f"sent to {to}"

    async def ask(session: str, prompt: str) -> object:
        with logfire.set_baggage(session_id=session), logfire.span("user asked {prompt}", prompt=prompt):
            if prompt == harness.LONG:
                async with agent.run_stream(prompt) as result:
                    async for _ in result.stream_text(delta=True):
                        pass
                return None
            return (await agent.run(prompt)).output

    asyncio.run(harness.run_sessions(ask))
    logfire.shutdown()


if __name__ == "__main__":
    main()
