"""Span text is data, never markup: the exports of a turn whose names and ids hold HTML stay inert."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
import storebuilder
from conftest_values import T0_MS
from markdown_it import MarkdownIt
from turnlens.export import report

SESSION = 's-"evil"'
TURN = "t</details><script>alert('turn')</script>"
TOOL = "<img src=x onerror=alert('tool')>"
CALL = "call-<b>bold</b>|pipe"
KEY = "key-[click](javascript:alert('key'))"


@pytest.fixture(scope="module")
def evil_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    b = storebuilder.StoreBuilder(tmp_path_factory.mktemp("evil") / "store")
    storebuilder.cancelled_turn(b, session=SESSION, turn=TURN, t0_ms=T0_MS, tool=TOOL, call=CALL, key=KEY)
    return b.write()


class _Elements(HTMLParser):
    """The element names and attributes an HTML renderer would build."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]
        self.hrefs += [value or "" for name, value in attrs if name == "href"]

    def handle_endtag(self, tag: str) -> None:
        self.tags.append(f"/{tag}")


def _parse(markup: str) -> _Elements:
    parser = _Elements()
    parser.feed(markup)
    return parser


def test_markdown_renders_span_text_as_text(evil_store: Path) -> None:
    md = report.export_incident(evil_store, session_id=SESSION, turn_id=TURN, fmt="md")
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)  # as a wiki renders it
    elements = _parse(rendered)
    assert not {"script", "img", "b"} & set(elements.tags)
    assert "onerror" not in elements.attributes
    assert not any(href.startswith("javascript:") for href in elements.hrefs)
    assert elements.tags.count("details") == elements.tags.count("/details") == 1
    after_details = rendered.split("</details>", 1)[1]
    assert "<table" not in after_details  # the raw events table stayed inside its block
    assert "alert('tool')" in rendered.replace("&#x27;", "'").replace("&quot;", '"')  # shown, as text


def test_html_renders_span_text_as_text(evil_store: Path) -> None:
    page = report.export_incident(evil_store, session_id=SESSION, turn_id=TURN, fmt="html")
    elements = _parse(page)
    assert not {"script", "img", "b"} & set(elements.tags)
    assert "onerror" not in elements.attributes
    assert not any(href.startswith("javascript:") for href in elements.hrefs)


def test_json_keeps_the_values_exactly(evil_store: Path) -> None:
    doc = json.loads(report.export_incident(evil_store, session_id=SESSION, turn_id=TURN, fmt="json"))
    assert doc["scope"]["turn_id"] == TURN
    ledger = doc["sections"]["ledger"]["rows"]
    assert [(r["tool_name"], r["tool_call_id"], r["idempotency_key"]) for r in ledger] == [(TOOL, CALL, KEY)]


@pytest.mark.parametrize(
    ("session_id", "turn_id"),
    [
        ("s1", "t1"),
        (SESSION, TURN),
        ("../../etc", "passwd\x00\n"),
        ("..", ".."),
        ("a" * 500, "b/c\\d"),
        ("x...y", "z"),
    ],
)
def test_the_download_name_is_safe_whatever_the_ids(session_id: str, turn_id: str) -> None:
    from turnlens.dashboard import export_buttons

    name = export_buttons.file_name(session_id, turn_id, "md")
    assert name.startswith("incident-") and name.endswith(".md")
    assert all(ch.isalnum() or ch in "._-" for ch in name), name
    assert ".." not in name and len(name) < 150
    assert export_buttons.file_name("s1", "t1", "html") == "incident-s1-t1.html"
