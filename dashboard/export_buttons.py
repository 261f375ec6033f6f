"""The Turn detail page's export buttons: the same incident files `turnlens export` writes, as downloads."""

from __future__ import annotations

import functools
from typing import Literal

import streamlit as st
from turnlens.dashboard import data
from turnlens.export import report

Format = Literal["html", "md", "json"]
FORMATS: dict[Format, tuple[str, str]] = {
    "html": ("HTML", "text/html"),
    "md": ("Markdown", "text/markdown"),
    "json": ("JSON", "application/json"),
}


def build(session_id: str, turn_id: str, fmt: Format) -> bytes:
    """The incident file of one turn, read through the dashboard's hardened read-only connection."""
    cursor = data.cursor()
    try:
        return report.export_incident(cursor, session_id=session_id, turn_id=turn_id, fmt=fmt).encode()
    finally:
        cursor.close()


def render(*, session_id: str, turn_id: str) -> None:
    """One download button per format; each file is built only when its button is pressed."""
    columns = st.columns(len(FORMATS))
    for column, (fmt, (label, mime)) in zip(columns, FORMATS.items(), strict=True):
        column.download_button(
            label,
            data=functools.partial(build, session_id, turn_id, fmt),
            file_name=f"incident-{session_id}-{turn_id}.{fmt}",
            mime=mime,
            icon=":material/download:",
            on_click="ignore",
            key=f"export_{fmt}",
            width="stretch",
        )
