"""A framework turn on the Turn detail page: a real `turnlens dashboard` in Debian's headless Chromium."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from dashboard_server import CHROMIUM, CHROMIUM_ARGS, NO_CHROMIUM, running_dashboard


def screenshot_turn(store: Path, session: str, turn: str, shot: Path, *, wait_for: str | None = None) -> str:
    """Opens one turn's Turn detail page, waits for its timeline (and for the text `wait_for`, from a part of
    the page drawn later), screenshots it; returns the page text."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), NO_CHROMIUM
    shot.parent.mkdir(parents=True, exist_ok=True)
    with running_dashboard(store, shot.with_suffix(".dashboard.log")) as url:
        query = urllib.parse.urlencode({"session": session, "turn": turn})
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 2400})
            page.goto(f"{url}/turn?{query}", wait_until="domcontentloaded")
            page.get_by_text("Whole turn").first.wait_for(timeout=60_000)  # the waterfall's toggle: drawn
            page.wait_for_function(  # the charts draw
                """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
                    .every(c => c.querySelector('svg g, canvas'))""",
                timeout=60_000,
            )
            if wait_for is not None:
                page.get_by_text(wait_for).first.wait_for(timeout=60_000)
            page.screenshot(path=str(shot), full_page=True)
            assert page.locator('[data-testid="stException"]').count() == 0
            text = page.locator('[data-testid="stMain"]').inner_text()
            browser.close()
        return text
