"""A page whose store cannot answer shows a sentence and a retry button in Chromium, never a traceback, and
shows its data again once the store is repaired and the button pressed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_server import CHROMIUM, CHROMIUM_ARGS, NO_CHROMIUM, running_dashboard
from turnlens.collector.store import Store
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog

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
    with running_dashboard(broken_store, tmp_path / "dashboard.log") as url:
        yield url


@pytest.mark.parametrize("path", ["", "turns"])
def test_a_failing_page_says_so_in_a_sentence_and_retries(
    dashboard: str, broken_store: Path, path: str
) -> None:
    if not CHROMIUM.exists():
        pytest.fail(NO_CHROMIUM)
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
