"""Screenshots of every dashboard page and of the HTML export at 1440 px, for docs/dashboard.md.

Usage: `turnlens dashboard --store DIR` running on PORT, then
`python scripts/docs_screenshots.py http://127.0.0.1:PORT DIR SESSION TURN` (Debian's chromium).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image
from playwright.sync_api import Page, sync_playwright

OUT = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
MAX_HEIGHT = 2600  # px: the top of a long page is what a reader needs to recognise it


def _idle(page: Page) -> None:
    page.wait_for_selector('[data-testid="stAppViewContainer"]', timeout=60_000)
    time.sleep(1.5)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
        page.locator('[data-testid="stStatusWidget"]').count()
        or page.locator('[data-testid="stSpinner"]').count()
    ):
        time.sleep(0.3)
    time.sleep(2)


def _full(page: Page, path: Path) -> None:
    height = page.evaluate(
        """() => Math.max(...['[data-testid="stMain"]', '[data-testid="stMainBlockContainer"]', 'body']
            .map(s => document.querySelector(s)).filter(Boolean).map(e => e.scrollHeight))"""
    )
    page.set_viewport_size({"width": 1440, "height": min(int(height) + 40, MAX_HEIGHT)})
    time.sleep(1.5)
    page.screenshot(path=str(path))
    _shrink(path)


def _shrink(path: Path) -> None:
    """A 256-colour palette keeps a page screenshot to a few hundred kB."""
    image = Image.open(path).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def main(url: str, store: str, session: str, turn: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    pages = {
        "overview": "/overview",
        "turns": "/turns?kind=cancelled_but_committed",
        "turn_detail": f"/turn?session={session}&turn={turn}",
        "side_effects": "/side_effects",
        "tools": "/tools",
        "alerts": "/alerts",
        "sql_console": "/sql?sql=select+kind%2C+count(*)+from+divergences+group+by+kind+order+by+2+desc",
    }
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        for name, path in pages.items():
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(url + path)
            _idle(page)
            _full(page, OUT / f"{name}.png")
            page.close()
        with tempfile.TemporaryDirectory() as tmp:
            export = Path(tmp) / "incident.html"
            turnlens = Path(sys.executable).with_name("turnlens")
            subprocess.run(
                [
                    str(turnlens),
                    "export",
                    "--store",
                    store,
                    "--session",
                    session,
                    "--turn",
                    turn,
                    "--out",
                    str(export),
                ],
                check=True,
            )
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(export.as_uri())
            time.sleep(1)
            page.set_viewport_size({"width": 1440, "height": MAX_HEIGHT})
            page.screenshot(path=str(OUT / "export.png"))
            _shrink(OUT / "export.png")
            # the ledger and the findings come after the long timeline table: a picture of their own
            top = page.locator("#ledger").bounding_box()["y"] - 80
            bottom = page.locator("#findings").bounding_box()
            clip = {"x": 0, "y": top, "width": 1440, "height": bottom["y"] + bottom["height"] + 20 - top}
            page.screenshot(path=str(OUT / "export_ledger.png"), full_page=True, clip=clip)
            _shrink(OUT / "export_ledger.png")
        browser.close()


if __name__ == "__main__":
    main(*sys.argv[1:5])
