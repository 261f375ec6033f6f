"""A real `turnlens dashboard` process loaded page by page in headless Chromium, one screenshot per page."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from turnlens.dashboard import data
from turnlens.queries import catalog

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# url path and query → text the page must show once its data is loaded ({session}/{turn}: an incident turn).
PAGES = {
    "overview": ("", "", "Cancel → ack P95"),  # the default page lives at the root
    "turns": ("turns", "", "Matching turns"),
    "turn_detail": ("turn", "?session={session}&turn={turn}", "cancelled_but_committed"),
    "side_effects": ("side_effects", "", "Ghost commits"),
    "tools": ("tools", "", "untiered"),
    "alerts": ("alerts", "", "Rules"),
    "sql_console": ("sql", "?sql=select+kind+from+divergences", "rows in"),
}


def _die_with_parent() -> None:
    """The server gets SIGTERM if pytest itself is killed (a timeout), instead of outliving it."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def incident_turn(sample_store: Path) -> dict[str, str]:
    """A turn of the sample with a cancelled-but-committed finding (the one turnlens is about)."""
    con = catalog.connect(sample_store)
    try:
        for turn in data.run_named(con, "recent_turns", {"limit": 500}).itertuples():
            params = {"session": turn.session_id, "turn": turn.turn_id}
            if "cancelled_but_committed" in set(data.run_named(con, "turn_findings", params)["kind"]):
                return params
    finally:
        con.close()
    raise AssertionError("the sample holds no cancelled-but-committed turn")


@pytest.fixture(scope="module")
def dashboard_url(sample_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    turnlens = Path(sys.executable).with_name("turnlens")
    log = open(tmp_path_factory.mktemp("dashboard-log") / "dashboard.log", "w+")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [str(turnlens), "dashboard", "--store", str(sample_store), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ},
        preexec_fn=_die_with_parent,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 45
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
                    if response.read() == b"ok":
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"turnlens dashboard did not come up:\n{log.read()}")
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is not installed: `make browser` installs it (make test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def _wait_until_idle(page: object) -> None:
    """Streamlit shows its status widget while a script runs; wait for it to go and the charts to draw."""
    page.wait_for_selector('[data-testid="stAppViewContainer"]', timeout=30_000)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        running = page.locator('[data-testid="stStatusWidget"]').count()
        skeletons = page.locator('[data-testid="stSkeleton"]').count()
        if not running and not skeletons:
            break
        time.sleep(0.2)
    time.sleep(1.0)


def _fit_viewport_to_content(page: object) -> None:
    """Streamlit scrolls inside its main container, so a full-page screenshot needs a viewport that tall."""
    height = page.evaluate(
        """() => Math.max(...['[data-testid="stMain"]', '[data-testid="stMainBlockContainer"]', 'body']
            .map(s => document.querySelector(s)).filter(Boolean).map(e => e.scrollHeight))"""
    )
    page.set_viewport_size({"width": 1440, "height": min(int(height) + 40, 6000)})
    time.sleep(1.0)  # charts redraw at the new size


@pytest.mark.parametrize("name", list(PAGES))
def test_page_loads_in_chromium(
    dashboard_url: str, browser: object, output_dir: Path, incident_turn: dict[str, str], name: str
) -> None:
    path, query, expected = PAGES[name]
    query = query.format(**incident_turn)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    outside: list[str] = []
    page.on(
        "request",
        lambda r: (
            outside.append(r.url) if not r.url.startswith(("http://127.0.0.1", "data:", "blob:")) else None
        ),
    )
    try:
        page.goto(f"{dashboard_url}/{path}{query}", wait_until="domcontentloaded")
        page.get_by_text(expected).first.wait_for(timeout=30_000)
        _wait_until_idle(page)
        _fit_viewport_to_content(page)
        shot = output_dir / "dashboard" / f"{name}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
        assert page.locator('[data-testid="stException"]').count() == 0, page.locator(
            '[data-testid="stException"]'
        ).first.inner_text()
        assert outside == [], f"the page reached outside localhost: {outside}"
        assert page.get_by_text("Page not found").count() == 0, "a deep link fell back to the main page"
    finally:
        context.close()
