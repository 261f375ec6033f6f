"""The Turn detail page's export buttons: the same incident files `turnlens export` writes, as downloads."""

from __future__ import annotations

import importlib

import streamlit as st
from turnlens.dashboard import data

FORMATS = {
    "html": ("HTML", "text/html"),
    "md": ("Markdown", "text/markdown"),
    "json": ("JSON", "application/json"),
}


def render(*, session_id: str, turn_id: str) -> None:
    """One download button per format; each file is built only when its button is pressed."""
    try:
        report = importlib.import_module("turnlens.dashboard.report")
    except ModuleNotFoundError:
        st.caption("Incident export is not installed in this build.")
        return
    columns = st.columns(len(FORMATS))
    for column, (fmt, (label, mime)) in zip(columns, FORMATS.items(), strict=True):

        def build(fmt: str = fmt) -> bytes:
            cursor = data.cursor()  # the dashboard's hardened read-only connection, not a second one
            try:
                return report.export_incident(
                    cursor, session_id=session_id, turn_id=turn_id, fmt=fmt
                ).encode()
            finally:
                cursor.close()

        column.download_button(
            label,
            data=build,
            file_name=f"incident-{session_id}-{turn_id}.{fmt}",
            mime=mime,
            icon=":material/download:",
            on_click="ignore",
            key=f"export_{fmt}",
            width="stretch",
        )
