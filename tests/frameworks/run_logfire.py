"""Logfire's SDK sending to turnlens over OTLP/HTTP (not to Logfire's service), with
`logfire.instrument_pydantic_ai()` and the session as Logfire's documented baggage `session_id`."""

from __future__ import annotations

import asyncio

import logfire
import scenario_harness as harness
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor


def keep_session_id(match: logfire.ScrubMatch) -> object:
    """Logfire scrubs every attribute whose name says "session"; the session id is no secret here."""
    if match.path == ("attributes", "session_id"):
        return match.value
    return None


def configure(endpoints: harness.Endpoints) -> None:
    """Logfire sending to the collector only, pydantic-ai instrumented."""
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


def main() -> None:
    endpoints = harness.parse_endpoints()
    configure(endpoints)
    agent = harness.pydantic_agent(endpoints)

    async def ask(session: str, prompt: str) -> object:
        with logfire.set_baggage(session_id=session), logfire.span("user asked {prompt}", prompt=prompt):
            return await harness.ask_pydantic_agent(agent, prompt)

    asyncio.run(harness.run_sessions(ask))
    logfire.shutdown()


if __name__ == "__main__":
    main()
