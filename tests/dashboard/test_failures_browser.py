"""A page whose store cannot answer shows a sentence and a retry button in Chromium, never a traceback, and
shows its data again once the store is repaired and the button pressed."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from turnlens.collector.store import Store
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog

from .test_browser import CHROMIUM, CHROMIUM_ARGS, _die_with_parent, _free_port

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture()
def broken_store(tmp_path: Path) -> Path:
    """A store whose catalogue file is garbage, as a disk error or a half-copied backup leaves one."""
    store = tmp_path / "store"
    Store(store).close()
    (store / catalog.CATALOG_FILE).write_bytes(b"not a database" * 100)
    return store


@pytest.fixture()
def dashboard(broken_store: Path, tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    log = open(tmp_path / "dashboard.log", "w+")  # noqa: SIM115 - closed below
    turnlens = Path(sys.executable).with_name("turnlens")
    process = subprocess.Popen(
        [str(turnlens), "dashboard", "--store", str(broken_store), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
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


@pytest.mark.parametrize("path", ["", "turns"])
def test_a_failing_page_says_so_in_a_sentence_and_retries(
    dashboard: str, broken_store: Path, path: str
) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is not installed: `make browser` installs it (make test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{dashboard}/{path}", wait_until="domcontentloaded")
            page.get_by_text("could not be shown").first.wait_for(timeout=60_000)
            text = page.locator('[data-testid="stMain"]').inner_text()
            assert "It is retried in" in text
            assert "Traceback" not in text and 'File "' not in text, text
            assert page.locator('[data-testid="stException"]').count() == 0

            catalog.write_catalog(broken_store, segments_glob(broken_store))  # the store is repaired
            page.get_by_role("button", name="Retry now").click()
            page.get_by_text("could not be shown").wait_for(state="detached", timeout=60_000)
            assert page.locator('[data-testid="stMain"] h1').first.inner_text() in ("Overview", "Turns")
        finally:
            browser.close()
