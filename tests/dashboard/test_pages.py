"""Every page of the dashboard, run through Streamlit's AppTest on a small real store."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


def open_page(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(params)
    at.run()
    if page != "overview":
        at.switch_page(f"pages/{page}.py").run()
    return at


def text_of(at: AppTest) -> str:
    parts = [
        e.value
        for kind in ("markdown", "caption", "error", "warning", "info", "success", "title", "subheader")
        for e in getattr(at, kind)
    ]
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize(
    "page", ["overview", "turns", "turn_detail", "side_effects", "tools", "alerts", "sql_console"]
)
def test_page_runs_without_exception(store: Path, page: str) -> None:
    at = open_page(page)
    assert not at.exception, at.exception
    print(text_of(at)[:3000])
