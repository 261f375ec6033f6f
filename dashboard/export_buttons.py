"""The Turn detail page's export buttons: the same incident files `turnlens export` writes, as downloads."""

from __future__ import annotations

import functools
import re
from typing import Literal

import duckdb
import streamlit as st
from turnlens.collector import quarantine
from turnlens.dashboard import data
from turnlens.export import report

Format = Literal["html", "md", "json"]
FORMATS: dict[Format, tuple[str, str]] = {
    "html": ("HTML", "text/html"),
    "md": ("Markdown", "text/markdown"),
    "json": ("JSON", "application/json"),
}


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
NAME_PART_LIMIT = 60  # characters kept of each id in a file name


def file_name(session_id: str, turn_id: str, fmt: Format) -> str:
    """The download's file name: ids come from span data, so only letters, digits, `.`, `_` and `-` are
    kept (no `/`, `..`, quotes or control characters reach the browser's save dialog), each id shortened."""

    def part(text: str) -> str:
        safe = re.sub(r"\.{2,}", ".", _UNSAFE.sub("_", text)).strip("._")
        return safe[:NAME_PART_LIMIT] or "unnamed"

    return f"incident-{part(session_id)}-{part(turn_id)}.{fmt}"


def build(session_id: str, turn_id: str, fmt: Format) -> bytes:
    """The incident file of one turn, read through the dashboard's hardened read-only connection."""
    def export(cursor: duckdb.DuckDBPyConnection) -> bytes:
        return report.export_incident(cursor, session_id=session_id, turn_id=turn_id, fmt=fmt).encode()

    # under a reader lease, and past a segment that cannot be read
    return quarantine.retrying(data.settings().store_dir, lambda: data.read(export))


def render(*, session_id: str, turn_id: str) -> None:
    """One download button per format; each file is built only when its button is pressed."""
    columns = st.columns(len(FORMATS))
    for column, (fmt, (label, mime)) in zip(columns, FORMATS.items(), strict=True):
        column.download_button(
            label,
            data=functools.partial(build, session_id, turn_id, fmt),
            file_name=file_name(session_id, turn_id, fmt),
            mime=mime,
            icon=":material/download:",
            on_click="ignore",
            key=f"export_{fmt}",
            width="stretch",
        )
