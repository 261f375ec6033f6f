"""The HTML export in a real headless Chromium: renders offline, makes no request, reads in HLC order."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from conftest_values import T0
from turnlens.export import report

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
]


@pytest.fixture(autouse=True)
def _chromium_installed() -> None:
    if not CHROMIUM.exists():  # a missing browser is a broken install step, not a reason to pass quietly
        pytest.fail("Debian's chromium is not installed: `make browser` installs it (make test does)")


def test_html_export_opens_offline_and_shows_the_timeline_in_hlc_order(store: Path, output_dir: Path) -> None:
    from playwright.sync_api import sync_playwright

    from turnlens.cli import main

    at = (T0 + timedelta(seconds=30)).isoformat()
    assert (
        main(
            ["alerts", "run", "--store", str(store), "--at", at, "--notify", f"file:{store / 'pages.jsonl'}"]
        )
        == 2
    )
    page_file = output_dir / "incident-s1-t1.html"
    page_file.write_text(report.export_incident(store, session_id="s1", turn_id="t1", fmt="html"))

    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("request", lambda request: requests.append(request.url))
            page.goto(page_file.as_uri(), wait_until="load")
            title = page.title()
            headings = page.locator("h2").all_inner_texts()
            svg_width = page.locator(".chart svg").first.bounding_box()["width"]
            lane_labels = page.locator(".chart svg text").evaluate_all("els => els.map(e => e.textContent)")
            header = page.locator("#timeline thead th").all_inner_texts()
            rows = page.locator("#timeline tbody tr").evaluate_all(
                "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText))"
            )
            alerts = page.locator("#alerts tbody tr").all_inner_texts()
            verdicts = page.locator("#verdict-matrix tbody tr").first.locator("td").all_inner_texts()
            # the ledger's phase times and the findings' evidence wrap inside the page, not off it
            overflow = page.evaluate(
                """() => ['ledger', 'findings'].map(id =>
                    document.getElementById(id).getBoundingClientRect().right
                    - document.body.getBoundingClientRect().right)"""
            )
            page.screenshot(path=str(output_dir / "incident-s1-t1.png"), full_page=True)
        finally:
            browser.close()

    assert requests == [
        page_file.as_uri()
    ]  # the file itself and nothing else: no script, style or font fetched
    assert "turn t1 of session s1" in title
    for section in (
        "Summary",
        "The five layers side by side",
        "Timeline (HLC order)",
        "Side-effect ledger",
        "Findings",
        "Alerts that overlapped",
        "Clock skew per node",
        "Appendix: raw events",
    ):
        assert section in headings
    assert svg_width > 400
    assert max(overflow) <= 1, f"the ledger or findings table runs {max(overflow):.0f} px off the page"
    assert {"http", "stream", "runtime", "tool", "third_party"} <= set(lane_labels)
    assert any("CancelledButCommittedIrreversible" in row for row in alerts)
    assert verdicts == ["t1", "cancelled", "cancelled", "cancelled", "succeeded", "acknowledged"]

    seq, hlc, name = header.index("seq"), header.index("order_hlc"), header.index("name")
    assert [int(r[seq]) for r in rows] == list(range(1, len(rows) + 1))
    stamps = [r[hlc] for r in rows]  # "2026-01-01T12:00:00.250Z+0": ISO text sorts as time, then logical
    keys = [(s.rsplit("+", 1)[0], int(s.rsplit("+", 1)[1])) for s in stamps]
    assert keys == sorted(keys)
    names = [r[name] for r in rows]
    assert names.index("cancel.requested") < names.index("tool.committed") < names.index("third_party.ack")
