"""Fixtures of the alert tests: a hand-built store, a receiver listening on 127.0.0.1, the CLI."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import storebuilder


class Receiver:
    """A real HTTP server that records every POST: path, headers and the decoded JSON body."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append(
                    {
                        "path": self.path,
                        "content_type": self.headers.get("Content-Type"),
                        "body": json.loads(body),
                    }
                )
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def bodies(self, path: str) -> list[Any]:
        return [r["body"] for r in self.requests if r["path"] == path]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


@pytest.fixture
def builder(tmp_path: Path) -> Any:
    return storebuilder.StoreBuilder(tmp_path / "store")


@pytest.fixture
def turnlens(capsys: pytest.CaptureFixture[str]) -> Any:
    """Runs `turnlens ARGS…` in-process; returns (exit code, stdout, stderr)."""
    from turnlens.cli import main

    def run(*argv: str) -> tuple[int, str, str]:
        code = main([str(a) for a in argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
