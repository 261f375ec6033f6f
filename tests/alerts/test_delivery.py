"""Alert delivery against real local HTTP servers: at least once through an outage, every target tried,
and a deadline on each whole POST however slowly a receiver answers."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_run import RECENT_CANCEL, at, rules_dir, store  # noqa: F401 - `store` is a fixture

Answer = Callable[[dict[str, Any]], int | None]  # a status to answer, or None: trickle the answer


class Hook:
    """A webhook receiver on 127.0.0.1 whose answer a test chooses: a status, or one byte a second."""

    def __init__(self, port: int = 0, answer: Answer = lambda body: 200) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.answer = answer
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                status = hook.answer(body)
                if status is None:  # headers, then a long body a byte at a time
                    self.send_response(200)
                    self.send_header("Content-Length", "60")
                    self.end_headers()
                    for _ in range(60):
                        try:
                            self.wfile.write(b"x")
                            self.wfile.flush()
                        except OSError:
                            return
                        time.sleep(1.0)
                    return
                if 200 <= status < 300:
                    hook.bodies.append(body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hooks() -> Iterator[list[Hook]]:
    started: list[Hook] = []
    yield started
    for hook in started:
        hook.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _two_rules(tmp_path: Path) -> Path:
    """RecentCancel and a copy named CancelSeen: two alert names, so two webhook groups."""
    folder = rules_dir(tmp_path)
    twin = RECENT_CANCEL.format(severity="critical").replace("RecentCancel", "CancelSeen")
    (folder / "cancel_seen.sql").write_text(twin)
    (folder / "_order").write_text("recent_cancel.sql\ncancel_seen.sql\n")
    return folder


def _names(bodies: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(b["groupLabels"]["alertname"], b["status"]) for b in bodies]


def test_news_missed_while_the_webhook_was_down_is_sent_when_it_is_back(
    turnlens, store: Path, tmp_path: Path, hooks: list[Hook]  # noqa: F811 - the fixture
) -> None:
    rules = rules_dir(tmp_path)
    port = _free_port()
    target = ["--notify", f"webhook:http://127.0.0.1:{port}/hook"]
    run = ("alerts", "run", "--store", store, "--rules", rules, *target)
    turnlens(*run, "--at", at(timedelta(seconds=30)))  # pending: nothing to send
    code, _, err = turnlens(*run, "--at", at(timedelta(minutes=2, seconds=30)))  # fires; nobody listens
    assert code == 3 and "notify webhook" in err
    hooks.append(Hook(port))
    code, _, err = turnlens(*run, "--at", at(timedelta(minutes=3)))
    assert code == 2, err  # critical firing, delivered: no error
    assert _names(hooks[0].bodies) == [("RecentCancel", "firing")]
    turnlens(*run, "--at", at(timedelta(minutes=3, seconds=30)))
    assert len(hooks[0].bodies) == 1  # delivered once, not again


def test_a_failed_group_does_not_stop_the_others_and_is_retried(
    turnlens, store: Path, tmp_path: Path, hooks: list[Hook]  # noqa: F811 - the fixture
) -> None:
    rules = _two_rules(tmp_path)
    hook = Hook(answer=lambda body: 503 if body["groupLabels"]["alertname"] == "CancelSeen" else 200)
    hooks.append(hook)
    pages = tmp_path / "pages.jsonl"
    run = ("alerts", "run", "--store", store, "--rules", rules, "--notify", f"webhook:{hook.url}")
    run += ("--notify", f"file:{pages}")
    turnlens(*run, "--at", at(timedelta(seconds=30)))  # pending
    code, _, err = turnlens(*run, "--at", at(timedelta(minutes=2, seconds=30)))
    assert code == 3 and "CancelSeen" in err and "503" in err
    assert _names(hook.bodies) == [("RecentCancel", "firing")]  # the group after the failed one still went
    assert len(pages.read_text().splitlines()) == 2  # and so did the other target
    hook.answer = lambda body: 200
    code, _, err = turnlens(*run, "--at", at(timedelta(minutes=3)))
    assert code == 2, err
    assert _names(hook.bodies) == [("RecentCancel", "firing"), ("CancelSeen", "firing")]
    assert len(pages.read_text().splitlines()) == 2  # the file had it already


def test_a_receiver_answering_a_byte_a_second_cannot_hold_the_run(
    turnlens, store: Path, tmp_path: Path, hooks: list[Hook]  # noqa: F811 - the fixture
) -> None:
    rules = rules_dir(tmp_path)
    hook = Hook(answer=lambda body: None)
    hooks.append(hook)
    pages = tmp_path / "pages.jsonl"
    run = ("alerts", "run", "--store", store, "--rules", rules, "--notify", f"webhook:{hook.url}")
    run += ("--notify", f"file:{pages}", "--notify-timeout", "2")
    turnlens(*run, "--at", at(timedelta(seconds=30)))  # pending
    started = time.monotonic()
    code, _, err = turnlens(*run, "--at", at(timedelta(minutes=2, seconds=30)))
    elapsed = time.monotonic() - started
    assert code == 3 and "within 2 s" in err
    assert elapsed < 15, f"the run took {elapsed:.0f} s"  # the answer alone would take 60 s
    assert len(pages.read_text().splitlines()) == 1
