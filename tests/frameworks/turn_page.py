"""A framework turn on the Turn detail page: a real `turnlens dashboard` in Debian's headless Chromium."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_health(url: str, process: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
                if response.read() == b"ok":
                    return
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError("turnlens dashboard did not come up")
        time.sleep(0.3)


def screenshot_turn(store: Path, session: str, turn: str, shot: Path) -> str:
    """Opens one turn's Turn detail page, waits for its timeline, screenshots it; returns the page text."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "Debian's chromium is not installed: `make browser` installs it"
    port = _free_port()
    turnlens = Path(sys.executable).with_name("turnlens")
    process = subprocess.Popen(
        [str(turnlens), "dashboard", "--store", str(store), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for_health(url, process)
        query = urllib.parse.urlencode({"session": session, "turn": turn})
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 2400})
            page.goto(f"{url}/turn?{query}", wait_until="domcontentloaded")
            page.get_by_text("Whole turn").first.wait_for(timeout=60_000)  # the waterfall's toggle: drawn
            page.wait_for_timeout(1500)  # the charts draw
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
            assert page.locator('[data-testid="stException"]').count() == 0
            text = page.locator('[data-testid="stMain"]').inner_text()
            browser.close()
        return text
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
