"""Small pieces every page uses: the time window, links to a turn, HLC formatting, empty states."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal
from urllib.parse import urlencode

import altair as alt
import pandas as pd
import streamlit as st
from streamlit.elements.lib.column_types import ColumnConfig
from turnlens.dashboard import data, filters
from turnlens.kernel import contract

TURN_PAGE = "turn"  # url_path of the Turn detail page


def time_window(range_key: str) -> tuple[int | None, int | None]:
    """`(from_ms, to_ms)` of a TIME_RANGES key, ending at the newest data in the store; None = unbounded."""
    seconds = filters.TIME_RANGES.get(range_key)
    if seconds is None:
        return None, None
    bounds = data.query("store_bounds")
    newest = bounds["newest_ms"].iloc[0] if len(bounds) else None
    if newest is None or pd.isna(newest):
        return None, None
    return int(newest) - seconds * 1000, int(newest)


def describe_window(window: tuple[int | None, int | None]) -> str:
    start, end = window
    if start is None or end is None:
        return "all data in the store"
    return f"{format_ms(start)} → {format_ms(end)} UTC"


def snapshot_caption() -> None:
    """How fresh the per-turn views are: they read the snapshot the collector materialises every minute."""
    snapshot = data.snapshot_time()
    if snapshot is None:
        st.caption(
            "No snapshot yet: turns, findings, cancels and side effects are computed live from the segments "
            "(slow on a large store) until `turnlens materialize`, which the collector runs every minute, "
            "writes one."
        )
        return
    watermark_ms, built_ms = snapshot
    st.caption(
        f"Turns, findings, cancels and side effects as of the snapshot of spans received up to "
        f"{format_ms(watermark_ms)[:-4]} UTC (built {format_ms(built_ms)[11:-4]}; the collector refreshes it "
        "every minute)."
    )


def format_ms(ms: float | int | None) -> str:
    if ms is None or pd.isna(ms):
        return "—"
    return datetime.fromtimestamp(float(ms) / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def format_hlc(hlc: float | int | None) -> str:
    """An HLC in its one text form (`contract.format_hlc`), or a dash where there is none."""
    if hlc is None or pd.isna(hlc):
        return "—"
    return contract.format_hlc(int(hlc))


def turn_url(session_id: str, turn_id: str) -> str:
    """A relative link that opens the Turn detail page on one turn."""
    return f"{TURN_PAGE}?{urlencode({'session': session_id, 'turn': turn_id})}"


def with_turn_links(frame: pd.DataFrame) -> pd.DataFrame:
    """Adds an `open` column of links to each row's turn (needs session_id and turn_id)."""
    frame = frame.copy()
    frame.insert(
        0, "open", [turn_url(s, t) for s, t in zip(frame["session_id"], frame["turn_id"], strict=True)]
    )
    return frame


def turn_link_column() -> ColumnConfig:
    return st.column_config.LinkColumn("open", display_text="open ↗", help="Open this turn", width="small")


def hlc_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Renders every `*_hlc` column readably: the physical part as UTC time, then the logical counter."""
    frame = frame.copy()
    for column in frame.columns:
        if column.endswith("_hlc") or column == "hlc":
            frame[column] = frame[column].map(format_hlc)
    return frame


def empty(message: str) -> None:
    st.info(message, icon=":material/inbox:")


class section:  # noqa: N801 - used as `with common.section():`, like st.container
    """Shows a missing view as a note in this part of the page instead of stopping the whole page."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if isinstance(exc, data.StoreNotReady):
            st.info(str(exc), icon=":material/hourglass_empty:")
            return True
        return False


def show_chart(chart: alt.Chart | alt.LayerChart, *, room: int = 60) -> None:
    """Draws a chart at its own height plus `room` for axes and legend, the full width of its column.

    Streamlit sizes a layered chart stretched to its container without reading the chart's height,
    which squeezes lanes and hides legends; so the height is passed explicitly.
    """
    height = chart.to_dict().get("height")
    fitted: int | Literal["content"] = int(height) + room if isinstance(height, int | float) else "content"
    st.altair_chart(chart, width="stretch", height=fitted)
