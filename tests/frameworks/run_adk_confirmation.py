"""Google ADK's confirmation flow: send_email requires confirmation
(`FunctionTool(require_confirmation=True)`). The first run asks: ADK answers the call with a request for
confirmation (`adk_request_confirmation`) instead of running the tool. The application answers it, confirmed,
in a second run of the same session, which runs the tool. The program prints each step."""

from __future__ import annotations

import asyncio

import run_adk
import scenario_harness as harness

SESSION = "session-confirm"


def send_email(to: str, body: str) -> str:
    """Sends an e-mail."""
    print("e-mail sent", flush=True)
    return f"sent to {to}"


def main() -> None:
    endpoints = harness.parse_endpoints()
    provider = run_adk.tracing(endpoints)
    from google.adk.tools import FunctionTool
    from google.genai import types

    runner = run_adk.runner(endpoints, tools=[FunctionTool(send_email, require_confirmation=True)])

    async def ask_then_confirm() -> None:
        await runner.session_service.create_session(app_name="adk-app", user_id="user", session_id=SESSION)
        asked = None  # ADK's function call asking the application for the confirmation
        message = types.Content(role="user", parts=[types.Part(text=harness.EMAIL)])
        async for event in runner.run_async(user_id="user", session_id=SESSION, new_message=message):
            for call in event.get_function_calls():
                if call.name == "adk_request_confirmation":
                    asked = call
        assert asked is not None, "ADK did not ask for confirmation"
        print("asked", flush=True)
        confirmed = types.FunctionResponse(id=asked.id, name=asked.name, response={"confirmed": True})
        answer = types.Content(role="user", parts=[types.Part(function_response=confirmed)])
        async for _ in runner.run_async(user_id="user", session_id=SESSION, new_message=answer):
            pass
        print("confirmed", flush=True)

    asyncio.run(ask_then_confirm())
    provider.shutdown()


if __name__ == "__main__":
    main()
