"""The incident export: one turn, a session or a time range as a self-contained HTML, Markdown or JSON file.

Reviewers read it without turnlens: HTML carries its charts as inline SVG and nothing from the
network; Markdown pastes into a ticket; JSON carries the same sections for machines. `gather` runs the
queries and builds one Incident; `html_report`, `markdown_report` and `json_report` each render it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import duckdb
from turnlens.export.gather import (
    SECTIONS,
    ExportError,
    Format,
    Incident,
    Section,
    display,
    gather,
    headline,
    utc_text,
    verdict_matrix,
)
from turnlens.export.html_report import MAX_CHARTS, render_html
from turnlens.export.json_report import render_json
from turnlens.export.markdown_report import md_text, render_markdown
from turnlens.queries.catalog import reading

__all__ = [
    "MAX_CHARTS",
    "RENDERERS",
    "SECTIONS",
    "ExportError",
    "Format",
    "Incident",
    "Section",
    "display",
    "export_incident",
    "gather",
    "headline",
    "md_text",
    "render_html",
    "render_json",
    "render_markdown",
    "utc_text",
    "verdict_matrix",
]

RENDERERS: dict[str, Callable[[Incident], str]] = {
    "html": render_html,
    "md": render_markdown,
    "json": render_json,
}


def export_incident(
    store: Path | str | duckdb.DuckDBPyConnection,
    *,
    session_id: str | None = None,
    turn_id: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    fmt: Format = "html",
) -> str:
    """The incident file's text. `store` is a store directory (opened read-only) or a catalog connection.

    Scope: `session_id` (with `turn_id` for one turn), or `start` and `end` for every turn with a span
    between them.
    """
    if fmt not in RENDERERS:
        raise ExportError(f"format {fmt!r} is not one of {', '.join(RENDERERS)}")
    if isinstance(store, duckdb.DuckDBPyConnection):
        incident = gather(store, session_id=session_id, turn_id=turn_id, start=start, end=end)
    else:
        with reading(Path(store)) as con:  # under a reader lease: no file it lists is deleted meanwhile
            incident = gather(
                con, session_id=session_id, turn_id=turn_id, start=start, end=end, store_dir=Path(store)
            )
    return RENDERERS[fmt](incident)
