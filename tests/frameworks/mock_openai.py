"""A small OpenAI-compatible chat server on 127.0.0.1 that the frameworks under test talk to.

It answers /v1/chat/completions (and /chat/completions) from the last user message, the way a real model would
answer the test conversations: a greeting, a weather lookup through a tool call, a long answer streamed slowly
enough for the client to cancel half-way, and an e-mail sent through a tool call (both calls at once, in one
answer, when the message asks for both; a handoff to ADK's sub-agent `mailer` when the message names it).
Answers carry `usage` (in the last chunk when streamed) so the frameworks have token counts to report.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LONG_ANSWER_CHUNKS = 400  # at CHUNK_DELAY_S each: ~8 s if nobody cancels
CHUNK_DELAY_S = 0.02
TOOL_CALLS = {  # the word in the user's message -> the tool the model calls, its arguments and its call id
    "weather": ("get_weather", {"city": "Paris"}, "call_weather_1"),
    "email": ("send_email", {"to": "ops@example.com", "body": "Quarterly report"}, "call_email_1"),
}


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content or "")
    return ""


def _has_tool_result(messages: list[dict[str, Any]]) -> bool:
    """A tool result after the last user message: the model has what it asked for."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return False
        if message.get("role") == "tool":
            return True
    return False


def plan_answer(request: dict[str, Any]) -> dict[str, Any]:
    """The model's answer: {"text": ...} or {"tools": [(name, arguments, call id), ...]}; "slow" streams it
    slowly."""
    messages = request.get("messages", [])
    text = _last_user_text(messages).lower()
    tool_names = {t.get("function", {}).get("name") for t in request.get("tools") or []}
    wants_final_tool = "final_answer" in tool_names  # smolagents' tool-calling agent answers through a tool
    if "transfer_to_agent" in tool_names and "mailer" in text and not _has_tool_result(messages):
        # ADK's handoff: the agent the user named takes the conversation over
        return {"tools": [("transfer_to_agent", {"agent_name": "mailer"}, "call_transfer_1")]}
    calls = [call for word, call in TOOL_CALLS.items() if word in text]
    if calls and not _has_tool_result(messages):
        return {"tools": calls}
    if "essay" in text or "long" in text:
        return {"text": "".join(f"word{i} " for i in range(LONG_ANSWER_CHUNKS)), "slow": True}
    answer = (
        "It is sunny in Paris."
        if "weather" in text
        else "Sent."
        if "email" in text
        else "Hello! How can I help?"
    )
    if wants_final_tool:
        return {"tools": [("final_answer", {"answer": answer}, f"call_final_{abs(hash(text)) % 1000}")]}
    return {"text": answer}


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _tool_call(tool: tuple[str, dict[str, Any], str]) -> dict[str, Any]:
    name, arguments, call_id = tool
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def completion(request: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    """The non-streamed answer."""
    if "tools" in plan:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [_tool_call(tool) for tool in plan["tools"]],
        }
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": plan["text"]}, "stop"
    return {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "mock-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(20, 10),
    }


def chunks(request: dict[str, Any], plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The streamed answer, chunk by chunk, usage in the last one."""
    base = {
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model", "mock-model"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if "tools" in plan:
        for index, tool in enumerate(plan["tools"]):
            yield chunk({"tool_calls": [{"index": index, **_tool_call(tool)}]})
        yield chunk({}, "tool_calls")
    else:
        words = plan["text"].split(" ")
        for word in words:
            if not word:
                continue
            yield chunk({"content": word + " "})
        yield chunk({}, "stop")
    yield {**base, "choices": [], "usage": _usage(20, 10 if "tools" in plan else len(plan["text"].split()))}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._json(200, {"object": "list", "data": [{"id": "mock-model", "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        plan = plan_answer(request)
        self.server.requests.append(request)  # type: ignore[attr-defined]
        if not request.get("stream"):
            self._json(200, completion(request, plan))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for item in chunks(request, plan):
                self.wfile.write(f"data: {json.dumps(item)}\n\n".encode())
                self.wfile.flush()
                if plan.get("slow"):
                    time.sleep(CHUNK_DELAY_S)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.server.disconnects += 1  # type: ignore[attr-defined]
        self.close_connection = True

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class MockOpenAI:
    """The server, started on a free port of 127.0.0.1; `base_url` is what a client's base URL is set to."""

    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.requests = []  # type: ignore[attr-defined]
        self.server.disconnects = 0  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.server.requests  # type: ignore[attr-defined, no-any-return]

    def __enter__(self) -> MockOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
