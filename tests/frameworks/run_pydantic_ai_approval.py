"""pydantic-ai with a tool that requires approval (`requires_approval=True`): the first run ends asking for
it (DeferredToolRequests), the user approves, a second run executes the call. Nothing in pydantic-ai's spans
says the call was approved, so the application says it: in session-recorded it emits the span contract's
`approval.granted` (turnlens's instrument.tracing.approval_granted) naming the call, on its span around the
run that executes it; in session-unrecorded it approves without saying so."""

from __future__ import annotations

import scenario_harness as harness
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from turnlens.instrument import tracing


def main() -> None:
    endpoints = harness.parse_endpoints()
    provider = harness.tracer_provider(endpoints, "pydantic-ai-app")
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    openai = OpenAIProvider(base_url=endpoints.openai, api_key="sk-test")
    model = OpenAIChatModel("mock-model", provider=openai)
    agent = Agent(model, name="assistant", output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def send_email(to: str, body: str) -> str:
        """Sends an e-mail."""
        print("e-mail sent", flush=True)
        return f"sent to {to}"

    tracer = provider.get_tracer("app")
    for session in ("session-recorded", "session-unrecorded"):
        with tracer.start_as_current_span("chat turn", attributes={"session.id": session}):
            asked = agent.run_sync(harness.EMAIL)
        assert isinstance(asked.output, DeferredToolRequests), asked.output
        approvals = {call.tool_call_id: True for call in asked.output.approvals}  # the user approves
        with tracer.start_as_current_span("chat turn", attributes={"session.id": session}) as span:
            if session == "session-recorded":
                for call in asked.output.approvals:
                    tracing.approval_granted(span, tracing.ToolCall(call.tool_name, call.tool_call_id))
            results = DeferredToolResults(approvals=approvals)
            done = agent.run_sync(message_history=asked.all_messages(), deferred_tool_results=results)
        print(session, done.output, flush=True)
    provider.shutdown()


if __name__ == "__main__":
    main()
