"""The SQL console in a real `turnlens dashboard` in headless Chromium: a link cannot write to the store."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import pytest

from .test_browser import _wait_until_idle, dashboard_url  # noqa: F401 - a fixture of that module too

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _open(browser: object, url: str) -> tuple[object, object]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    _wait_until_idle(page)
    return context, page


def test_a_link_that_writes_runs_nothing_and_run_is_refused(
    dashboard_url: str,  # noqa: F811
    browser: object,
    sample_store: Path,
) -> None:
    folder = next((sample_store / "segments").rglob("*.parquet")).parent
    forged = folder / "forged.parquet"
    sql = f"explain analyze copy (select 1 as x) to '{forged}'"
    context, page = _open(browser, f"{dashboard_url}/sql?sql={urllib.parse.quote(sql)}")
    try:
        page.get_by_text("press Run").first.wait_for(timeout=30_000)
        assert not forged.exists(), "opening the link wrote into the store"
        page.get_by_role("button", name="Run").click()
        page.get_by_text("Permission denied").first.wait_for(timeout=60_000)
        assert not forged.exists(), "pressing Run wrote into the store"
    finally:
        context.close()


def test_a_plain_query_link_runs_on_load(dashboard_url: str, browser: object) -> None:  # noqa: F811
    sql = "select count(*) as spans_seen from spans"
    context, page = _open(browser, f"{dashboard_url}/sql?sql={urllib.parse.quote(sql)}")
    try:
        page.get_by_text("rows in").first.wait_for(timeout=60_000)
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        context.close()
