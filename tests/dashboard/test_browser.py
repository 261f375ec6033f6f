"""A real `turnlens dashboard` process loaded page by page in headless Chromium, one screenshot per page."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dashboard_server import running_dashboard
from turnlens.dashboard import data
from turnlens.queries import catalog

pytestmark = [pytest.mark.slow, pytest.mark.browser]

# url path and query → text the page must show once its data is loaded ({session}/{turn}: an incident turn).
PAGES = {
    "overview": ("", "", "Cancel → ack P95"),  # the root opens the Overview
    "overview_by_name": ("overview", "", "Cancel → ack P95"),
    "turns": ("turns", "", "Matching turns"),
    "turn_detail": ("turn", "?session={session}&turn={turn}", "cancelled_but_committed"),
    "side_effects": ("side_effects", "", "Ghost commits"),
    "tools": ("tools", "", "untiered"),
    "alerts": ("alerts", "", "Rules"),
    "sql_console": ("sql", "?sql=select+kind+from+divergences", "rows in"),
}


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
    with running_dashboard(
        sample_store, tmp_path_factory.mktemp("dashboard-log") / "dashboard.log", timeout_s=45
    ) as url:
        yield url


# every chart's drawing and its size, or null while one has not drawn yet
_CHARTS_DRAWN = """() => {
    const charts = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')];
    const drawn = charts.map(c => c.querySelector('svg g, canvas'));
    if (drawn.some(d => !d)) return null;
    return drawn.map(d => { const r = d.getBoundingClientRect(); return `${r.width}x${r.height}`; }).join();
}"""


def _charts_settled(page: object, timeout_s: float = 30) -> None:
    """Waits until every chart has drawn and no chart changed size between two looks 0.25 s apart."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        now = page.evaluate(_CHARTS_DRAWN)
        if now is not None and now == last:
            return
        last = now
        time.sleep(0.25)


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
    _charts_settled(page)


def _fit_viewport_to_content(page: object) -> None:
    """Streamlit scrolls inside its main container, so a full-page screenshot needs a viewport that tall."""
    height = page.evaluate(
        """() => Math.max(...['[data-testid="stMain"]', '[data-testid="stMainBlockContainer"]', 'body']
            .map(s => document.querySelector(s)).filter(Boolean).map(e => e.scrollHeight))"""
    )
    page.set_viewport_size({"width": 1440, "height": min(int(height) + 40, 6000)})
    _charts_settled(page)  # charts redraw at the new size


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
        page.get_by_text(expected).first.wait_for(timeout=60_000)  # a cold first page under load: >30 s
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
        assert page.get_by_text("Deploy", exact=True).count() == 0, "Streamlit's developer toolbar shows"
    finally:
        context.close()


# --- the incident review an SRE does: waterfall, drill-downs, SLO, time range, tables, notices ------------


@pytest.fixture()
def page(browser: object) -> Iterator[object]:
    """A fresh 1440 px wide tab."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    try:
        yield context.new_page()
    finally:
        context.close()


def _open(page: object, url: str, expected: str) -> None:
    page.goto(url, wait_until="domcontentloaded")
    page.get_by_text(expected).first.wait_for(timeout=60_000)
    _wait_until_idle(page)


def _svg_texts(chart: object) -> list[str]:
    return [t.strip() for t in chart.locator("svg text").all_text_contents()]


def _seconds_of_day(text: str) -> float:
    hours, minutes, seconds = text.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def _changed(
    page: object, read: Callable[[], list[str]], before: list[str], timeout_s: float = 60
) -> list[str]:
    """What `read` returns once it differs from `before` (the page reran after a click) and the rerun has
    finished: the first change can come while the script still runs, and a click then may be lost to it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = read()
        if now and now != before:
            _wait_until_idle(page)
            return read()
        time.sleep(0.3)
    raise AssertionError("the page did not change")


def _waterfall(page: object) -> object:
    return page.locator('[data-testid="stVegaLiteChart"]').filter(has_text="on the turn's clock").first


def test_turn_waterfall_nests_spans_opens_around_the_stop_and_details_a_click(
    dashboard_url: str, page: object, incident_turn: dict[str, str]
) -> None:
    _open(
        page,
        f"{dashboard_url}/turn?session={incident_turn['session']}&turn={incident_turn['turn']}",
        "Selected span",
    )
    texts = _svg_texts(_waterfall(page))
    assert any(t.startswith("└ ") for t in texts), f"no nested span: {texts}"
    assert "stop pressed" in texts
    assert any(re.fullmatch(r"[\d.]+ (ms|s)", t) for t in texts), "no span duration"
    assert any(t.endswith(" committed") for t in texts), "the commit carries no tool name"
    # the axis shows times of day, and opens on a window around the stop, not the whole turn
    caption = page.get_by_text(re.compile(r"stopped \(")).first.inner_text()
    stop = _seconds_of_day(re.search(r"at \d{4}-\d\d-\d\d[ T](\d\d:\d\d:\d\d\.\d{3})", caption).group(1))
    ticks = [_seconds_of_day(t) for t in texts if re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", t)]
    step = ticks[1] - ticks[0]  # the axis may end between two ticks
    assert len(ticks) >= 3 and ticks[0] - step <= stop <= ticks[-1] + step, (ticks, stop)
    page.get_by_text("Whole turn").click()
    whole = _changed(page, lambda: _svg_texts(_waterfall(page)), texts)
    whole_ticks = [_seconds_of_day(t) for t in whole if re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", t)]
    assert whole_ticks[-1] - whole_ticks[0] > ticks[-1] - ticks[0], "the default window is the whole turn"
    page.get_by_text("Whole turn").click()
    _changed(page, lambda: _svg_texts(_waterfall(page)), whole)
    _wait_until_idle(page)

    # a click on another span's bar details that span
    def selected() -> list[str]:
        return [
            page.locator('[data-testid="stMarkdownContainer"]')
            .filter(has_text="Selected span")
            .first.inner_text()
        ]

    before = selected()
    plot = _waterfall(page).locator("svg").first.bounding_box()
    for bar in _waterfall(page).locator("g.mark-rect path").all():
        box = bar.bounding_box()
        if (
            box
            and box["width"] > 6
            and plot["x"] + 270 < box["x"] + box["width"] / 2 < plot["x"] + plot["width"]
        ):
            bar.click(position={"x": min(box["width"] / 2, 10), "y": box["height"] / 2})
            try:
                _changed(page, selected, before, timeout_s=15)
                break
            except AssertionError:  # that bar was the selected one: try the next
                continue
    _wait_until_idle(page)
    assert selected() != before, "a click on a bar did not select its span"
    assert "span=" in page.url
    assert page.get_by_text("attribute", exact=True).count() >= 1


def test_a_chart_point_a_bar_and_a_tile_open_the_turns_behind_them(dashboard_url: str, page: object) -> None:
    _open(page, f"{dashboard_url}/overview", "Cancel-to-ack SLO")
    page.get_by_text("Each cancelled turn").click()  # the points are drawn once their expander is opened
    on_latency = page.locator('[data-testid="stVegaLiteChart"]').filter(has_text="cancel → ack (ms)")
    on_latency.nth(1).wait_for(timeout=60_000)  # the SLO's percentiles, then the points
    _wait_until_idle(page)
    latency = on_latency.last
    latency.locator("g.mark-symbol path").first.click()
    page.wait_for_url(re.compile(r"/turn\?session=.+&turn=.+"), timeout=60_000)
    page.get_by_text("Selected span").first.wait_for(timeout=60_000)

    _open(page, f"{dashboard_url}/overview", "Cancel-to-ack SLO")
    page.get_by_text("Open committed despite stop").click()
    page.wait_for_url(re.compile(r"/turns\?.*kind=cancelled_but_committed"), timeout=60_000)
    page.get_by_text("Matching turns").wait_for(timeout=60_000)

    _open(page, f"{dashboard_url}/overview", "Cancel-to-ack SLO")
    ranked = page.locator('[data-testid="stVegaLiteChart"]').filter(has_text="eager_side_effect").first
    ranked.locator("g.mark-rect path").first.click()  # the most frequent kind
    page.wait_for_url(re.compile(r"/turns\?.*kind=cancelled_but_committed"), timeout=60_000)


def test_the_slo_panel_shows_percentiles_and_burn_rate_against_labelled_thresholds(
    dashboard_url: str, page: object
) -> None:
    _open(page, f"{dashboard_url}/overview", "Cancel-to-ack SLO")
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    latency = _svg_texts(charts.filter(has_text="P95 objective").first)
    assert "P95 objective 100 ms" in latency and "P99 pages 500 ms" in latency
    # the sample's worst window, which only the SQL console showed before
    page.get_by_text("worst: 20 from 09:10 (P95 613 ms)").wait_for(timeout=10_000)
    page.get_by_role("tab", name="Burn rate").click()  # drawn once its tab is chosen
    burn = charts.filter(has_text="fast burn").first
    burn.wait_for(timeout=60_000)
    _wait_until_idle(page)
    assert "14.4 = fast burn" in _svg_texts(burn)


def test_the_time_range_comes_from_the_url_and_follows_to_other_pages(
    dashboard_url: str, page: object
) -> None:
    _open(page, f"{dashboard_url}/turns?from=2026-01-01T09:10:00Z&to=2026-01-01T09:15:00Z", "Matching turns")
    page.get_by_text("2026-01-01 09:10:00.000 → 2026-01-01 09:15:00.000 UTC").first.wait_for(timeout=10_000)
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Side effects").click()
    page.get_by_text("Ghost commits").wait_for(timeout=60_000)
    _wait_until_idle(page)
    assert "from=2026-01-01T09%3A10%3A00Z" in page.url or "from=2026-01-01T09:10:00Z" in page.url, page.url
    page.get_by_text("From (UTC)").wait_for(timeout=10_000)  # the picker shows the custom range there too


def _headers(page: object) -> list[str]:
    """The column headers of the page's tables, once the first one is drawn (the grid draws after the page's
    script has finished)."""
    headers = page.locator('[data-testid="stDataFrame"] [role="columnheader"]')
    headers.first.wait_for(state="attached", timeout=60_000)  # the grid keeps them in a hidden table
    return headers.all_inner_texts()


def test_every_table_shows_its_key_columns_at_1440_px(dashboard_url: str, page: object) -> None:
    _open(page, f"{dashboard_url}/turns", "Matching turns")
    assert {"session", "turn", "status", "finding kinds", "tools", "evidence"} <= set(_headers(page))
    _open(page, f"{dashboard_url}/side_effects", "Ghost commits")
    phases = ["dispatched", "committed", "compensated", "first ack", "charged", "receipt"]
    assert {"tool", "tier", "status", "findings", *phases} <= set(_headers(page))
    scroll = page.evaluate(  # the whole ledger table fits: nothing left to scroll to sideways
        """() => { const e = document.querySelector('[data-testid="stDataFrame"] .dvn-scroller');
                   return [e.scrollWidth, e.clientWidth]; }"""
    )
    assert scroll[0] <= scroll[1], f"the side effects table is {scroll[0]} px wide in {scroll[1]} px"
    _open(page, f"{dashboard_url}/tools", "untiered")
    tools = int(
        page.locator('[data-testid="stMetric"]').filter(has_text="Tools").first.inner_text().split()[-1]
    )
    grid_rows = page.locator('[data-testid="stDataFrame"] [role="row"]')
    grid_rows.first.wait_for(state="attached", timeout=60_000)  # drawn after the script has finished
    rows = grid_rows.count()
    assert rows == tools + 1, f"{rows - 1} of {tools} tools visible"


def test_a_page_shows_it_is_loading(
    dashboard_url: str, page: object, sample_store: Path, incident_turn: dict[str, str]
) -> None:
    """The main pane is never blank for long: a page that takes more than Streamlit's spinner delay (0.5 s)
    says it is loading. Whether a given load is slow depends on what earlier loads cached, so the test
    records every appearance of the spinner and asserts it was seen unless the page was drawn sooner."""
    con = catalog.connect(sample_store)
    try:  # a turn no other test opens (the oldest of the recent ones): its first load reads the store
        turns = data.run_named(con, "recent_turns", {"limit": 50})
    finally:
        con.close()
    turn = [t for t in turns.itertuples() if t.turn_id != incident_turn["turn"]][-1]
    # the page's own time runs from the sidebar's navigation (drawn by the app just before the page's script)
    # to its content; the browser's start-up of Streamlit before it shows nothing a page could fill
    page.add_init_script(  # type: ignore[attr-defined]
        """new MutationObserver(() => {
            if (!document.body) return;
            if (window.navAt === undefined && document.querySelector('[data-testid="stSidebarNav"]')) {
                window.navAt = performance.now();
            }
            if (document.body.innerText.includes("Loading Turn detail")) window.sawLoading = true;
            if (window.drawnAt === undefined && document.body.innerText.includes("Selected span")) {
                window.drawnAt = performance.now();
            }
        }).observe(document, {subtree: true, childList: true, characterData: true});"""
    )
    page.goto(f"{dashboard_url}/turn?session={turn.session_id}&turn={turn.turn_id}", wait_until="commit")
    page.get_by_text("Selected span").first.wait_for(timeout=60_000)
    saw_loading, page_ms = page.evaluate(  # type: ignore[attr-defined]
        "() => [window.sawLoading === true, window.drawnAt - (window.navAt ?? 0)]"
    )
    # the spinner shows once the script has run 0.5 s; a page drawn within 1.5 s of the navigation may have
    # spent the rest drawing what the script sent
    assert saw_loading or page_ms < 1500, f"no loading indicator while the page took {page_ms / 1000:.1f} s"


def test_unknown_link_values_are_reported_and_every_link_opens_a_page(
    dashboard_url: str, page: object
) -> None:
    _open(page, f"{dashboard_url}/turns?range=lolwut&kind=bogus", "Matching turns")
    page.get_by_text(re.compile("Unknown value lolwut for range in the link; showing all")).wait_for()
    page.get_by_text(re.compile("Unknown value bogus for kind in the link; ignoring it")).wait_for()
    links = page.locator('[data-testid="stSidebarNav"] a')
    for i in range(links.count()):
        links.nth(i).click()
        _wait_until_idle(page)
        assert page.get_by_text("Page not found").count() == 0, page.url
