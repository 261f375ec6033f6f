"""The dashboard in headless Chromium on a store of hostile values (bench/fuzz_values.py): every page and the
turn pages of the oddest turns render without an exception on the page.

The read-side fuzzer checks the queries behind the pages; this checks what the browser gets from them: ids of
quotes, right-to-left marks and 5,000 characters in a URL and a title, costs of NaN and infinity in a chart,
HLCs at year 2262 on a time axis.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import benchscripts
import pytest
from dashboard_server import running_dashboard
from turnlens.queries import catalog

pytestmark = [pytest.mark.slow, pytest.mark.browser]

PAGES = ["", "turns", "side_effects", "tools", "alerts"]


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("hostile") / "store"
    fuzz = benchscripts.load("fuzz_values")
    summary = fuzz.run(16, seed=20261207, store=store, refreshes=2, sample_turns=5)
    assert summary.failures == [], summary.to_json()
    return store


@pytest.fixture(scope="module")
def odd_turns(hostile_store: Path) -> list[dict[str, str]]:
    """The turns whose ids a URL and a page title find hardest, and the turns with the most findings."""
    with catalog.connect(hostile_store) as con:
        rows = con.execute(
            """
            select session_id, turn_id from turns
            where session_id is not null and not contains(session_id || turn_id, chr(0))
            order by (session_id || turn_id) similar to '[a-z0-9:-]*', findings desc, length(turn_id) desc,
                session_id, turn_id
            limit 6
            """
        ).fetchall()
    return [{"session": session, "turn": turn} for session, turn in rows]


def _rendered_without_exception(browser: object, url: str, absent: str | None = None) -> None:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    try:
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_selector('[data-testid="stAppViewContainer"]', timeout=60_000)
        heading = '[data-testid="stMainBlockContainer"] h1, [data-testid="stHeading"]'
        page.wait_for_selector(heading, timeout=60_000)
        page.wait_for_function(
            """() => !document.querySelector('[data-testid="stStatusWidget"]')
                && !document.querySelector('[data-testid="stSkeleton"]')""",
            timeout=60_000,
        )
        errors = page.locator('[data-testid="stException"]')
        assert errors.count() == 0, f"{url}: {errors.first.inner_text()[:2000]}"
        assert absent is None or page.get_by_text(absent).count() == 0, f"{url} shows {absent!r}"
    finally:
        context.close()


def test_every_page_and_the_oddest_turns_render_without_an_exception(
    hostile_store: Path, odd_turns: list[dict[str, str]], browser: object, tmp_path: Path
) -> None:
    assert len(odd_turns) == 6
    with running_dashboard(hostile_store, tmp_path / "dashboard.log", timeout_s=60) as url:
        for path in PAGES:
            _rendered_without_exception(browser, f"{url}/{path}")
        for turn in odd_turns:
            link = f"{url}/turn?{urllib.parse.urlencode(turn)}"
            _rendered_without_exception(
                browser, link, absent="in this store."
            )  # the deep link finds its turn
