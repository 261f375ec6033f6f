"""Framework runs on the dashboard's pages: a real `turnlens dashboard` in Debian's headless Chromium."""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from dashboard_server import CHROMIUM, CHROMIUM_ARGS, NO_CHROMIUM, running_dashboard

# A page to open: its path and query, where to save its screenshot, and the texts to wait for (its parts drawn
# last) before taking it
Page = tuple[str, Path, Sequence[str]]


def screenshot_pages(store: Path, pages: Sequence[Page]) -> list[str]:
    """Opens each page on one dashboard, waits for its texts and its charts, screenshots it; returns the
    pages' texts."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), NO_CHROMIUM
    texts = []
    log = pages[0][1].with_suffix(".dashboard.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with running_dashboard(store, log) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 2400})
        for path, shot, wait_for in pages:
            page.goto(f"{url}/{path}", wait_until="domcontentloaded")
            for text in wait_for:
                page.get_by_text(text).first.wait_for(timeout=60_000)
            page.wait_for_function(  # the charts draw
                """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
                    .every(c => c.querySelector('svg g, canvas'))""",
                timeout=60_000,
            )
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
            assert page.locator('[data-testid="stException"]').count() == 0
            texts.append(page.locator('[data-testid="stMain"]').inner_text())
        browser.close()
    return texts


def turn_path(session: str, turn: str) -> str:
    """The Turn detail page of one turn."""
    return "turn?" + urllib.parse.urlencode({"session": session, "turn": turn})


def screenshot_turn(store: Path, session: str, turn: str, shot: Path, *, wait_for: str | None = None) -> str:
    """Opens one turn's Turn detail page, waits for its timeline (and for the text `wait_for`, from a part of
    the page drawn later), screenshots it; returns the page text."""
    waits = ["Whole turn"] + ([wait_for] if wait_for is not None else [])  # the waterfall's toggle: drawn
    [text] = screenshot_pages(store, [(turn_path(session, turn), shot, waits)])
    return text
