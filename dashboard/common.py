"""Small pieces every page uses: the time window, links to a turn, HLC formatting, empty states, failures."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any, Literal, cast
from urllib.parse import urlencode

import altair as alt
import duckdb
import pandas as pd
import streamlit as st
from streamlit.elements.lib.column_types import ColumnConfig
from streamlit.elements.lib.mutable_expander_container import ExpanderContainer
from streamlit.elements.lib.mutable_tab_container import TabContainer
from turnlens.alerts import asof
from turnlens.dashboard import data, filters
from turnlens.kernel import contract
from turnlens.queries import catalog

TURN_PAGE = "turn"  # url_path of the Turn detail page
RETRY_S = 15  # a page that failed runs again after this long by itself
BEHIND_MS = 60_000  # spans waiting longer than this for the snapshot make the pages say they are behind
logger = logging.getLogger(__name__)


def newest_data() -> datetime | None:
    """When the last span of the store's newest turn was seen; None for an empty store."""
    bounds = data.query("store_bounds")
    newest = bounds["newest_ms"].iloc[0] if len(bounds) else None
    if newest is None or pd.isna(newest):
        return None
    return datetime.fromtimestamp(int(newest) / 1000, tz=UTC)


def as_of_ms() -> int | None:
    """The dashboard's "now" in Unix ms (`?asof=`, the wall clock by default); None when it names the newest
    data of an empty store. The wall clock is taken to the whole cache period (5 s by default), so the
    pages of one refresh share their cached queries."""
    period_ms = max(1, data.settings().cache_ttl_seconds) * 1000
    wall_ms = int(time.time() * 1000) // period_ms * period_ms
    wall = datetime.fromtimestamp(wall_ms / 1000, tz=UTC)
    try:
        return int(asof.resolve(filters.as_of(), newest_data, wall=wall).timestamp() * 1000)
    except asof.AsOfError:
        return None


def time_window(range_key: str) -> tuple[int | None, int | None]:
    """`(from_ms, to_ms)` of a TIME_RANGES key, ending at the as-of (the wall clock unless `?asof=` names
    another time, as `turnlens alerts run --at` does); None = unbounded."""
    if range_key == filters.CUSTOM:
        return filters.custom_window()
    seconds = filters.TIME_RANGES.get(range_key)
    end = None if filters.as_of() == asof.NOW and seconds is None else as_of_ms()
    if seconds is None or end is None:
        return None, end
    return end - seconds * 1000, end


def as_of_caption() -> None:
    """Says where the windows end, so the page and `turnlens alerts run` can be seen to agree."""
    spec = filters.as_of()
    end = as_of_ms()
    st.caption(
        f"As of {format_ms(end)[:-4]} UTC ({asof.describe(spec)}); `turnlens alerts run --at {spec}` "
        "evaluates the rules at the same time."
        if end is not None
        else "The store holds no turns yet."
    )


def describe_window(window: tuple[int | None, int | None]) -> str:
    start, end = window
    if start is None and end is None:
        return "all data in the store"
    return (
        f"{format_ms(start) if start is not None else '…'} → {format_ms(end) if end is not None else '…'} UTC"
    )


def snapshot_caption() -> None:
    """How fresh the per-turn views are: they read the derived state the collector refreshes every second or
    so, and say how far a full build of it got while one runs."""
    snapshot = data.snapshot_time()
    if snapshot is None:
        st.caption(
            "No snapshot yet: turns, findings, cancels and side effects are computed live from the segments "
            "(slow on a large store) until `turnlens materialize`, which the collector keeps running, "
            "writes one."
        )
        return
    watermark_ms, built_ms, margin_ms = snapshot
    progress = data.build_progress()
    if progress is not None:
        done, total = progress
        st.caption(
            f"Building the per-turn state: {done} of {total} partitions done, newest first. Turns that "
            "started before those are not shown yet."
        )
    st.caption(
        f"Turns, findings, cancels and side effects as of the snapshot of spans received up to "
        f"{format_ms(watermark_ms)[:-4]} UTC (built {format_ms(built_ms)[11:-4]}; the collector refreshes it "
        "every second or so)."
    )
    now_ms = time.time() * 1000
    # a snapshot of a minute ago may leave spans out; a store nobody writes to has none waiting. Spans inside
    # the margin the materialiser is told to leave unread wait by design.
    behind_ms = BEHIND_MS + margin_ms
    waiting = data.waiting_spans() if now_ms - watermark_ms > behind_ms else None
    if waiting is not None and now_ms - waiting[1] > behind_ms:
        copies, oldest_ms = waiting
        behind_s = (now_ms - oldest_ms) / 1000
        behind = f"{behind_s:.0f} s" if behind_s < 120 else f"{behind_s / 60:.0f} min"
        st.warning(
            f"These pages are {behind} behind the spans: {copies:,} span(s) "
            f"received since {format_ms(oldest_ms)[11:-4]} UTC are not in them yet. The materialiser the "
            "collector runs is behind the traffic, stopped, or rebuilding the state (the "
            "PerTurnStateBehind alert says the same).",
            icon=":material/hourglass_top:",
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


def lazy_expander(label: str, *, key: str, icon: str | None = None) -> ExpanderContainer | None:
    """An expander whose content is drawn only once it is opened (opening it reruns the page): the expander
    to draw into when it is open, else None. A page's long list of expanders drawn up front (every alert rule
    with its highlighted SQL, every view's columns) kept the browser busy for seconds on each visit."""
    expander = st.expander(label, icon=icon, key=key, on_change="rerun")
    return expander if expander.open else None


def lazy_tabs(labels: list[str], *, key: str) -> tuple[str, TabContainer]:
    """Tabs of which only the selected one is drawn (choosing another reruns the page): its label and the
    tab to draw into. Tables side by side cost the browser each, whether or not the reader looks at them."""
    tabs = st.tabs(labels, key=key, on_change="rerun")
    for label, tab in zip(labels, tabs, strict=True):
        if tab.open:
            return label, tab
    return labels[0], tabs[0]  # no state yet (a first run draws the first tab)


class section:  # noqa: N801 - used as `with common.section():`, like st.container
    """Shows a missing view as a note in this part of the page instead of stopping the whole page."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if isinstance(exc, data.StoreNotReady):
            st.info(str(exc), icon=":material/hourglass_empty:")
            return True
        return False


def chart_height(chart: alt.Chart | alt.LayerChart) -> int | None:
    """The height the chart was built with, read off the object: `to_dict()` would convert the whole chart
    only for `draw_chart` to convert it again."""
    height = getattr(chart, "height", None)
    return int(height) if isinstance(height, int | float) else None


class _Unchecked:
    """A chart as `st.altair_chart` converts it (its data as Arrow, its theme, its selections), less the
    check of the whole spec against Vega-Lite's JSON schema that `to_dict()` runs by default: ~0.05 of the
    0.46 server CPU s a load of Turn detail cost, at every load and rerun, for charts whose shape only changes
    with our code. The tests check every spec the pages draw against the schema instead
    (tests/dashboard/test_pages.py)."""

    def __init__(self, chart: alt.Chart | alt.LayerChart) -> None:
        self._chart = chart

    def to_dict(self) -> dict[str, Any]:
        return self._chart.to_dict(validate=False)


def draw_chart(
    chart: alt.Chart | alt.LayerChart,
    *,
    height: int | Literal["content"],
    on_select: Literal["rerun", "ignore"] = "ignore",
    selection_mode: list[str] | None = None,
    key: str | None = None,
) -> Any:
    """`st.altair_chart` the full width of its column, without re-validating the chart's spec (_Unchecked);
    returns what it returns (the selection, with `on_select="rerun"`)."""
    return st.altair_chart(
        cast(alt.LayerChart, _Unchecked(chart)),
        width="stretch",
        height=height,
        on_select=on_select,
        selection_mode=selection_mode,
        key=key,
    )


def show_chart(chart: alt.Chart | alt.LayerChart, *, room: int = 60) -> None:
    """Draws a chart at its own height plus `room` for axes and legend, the full width of its column.

    Streamlit sizes a layered chart stretched to its container without reading the chart's height,
    which squeezes lanes and hides legends; so the height is passed explicitly.
    """
    height = chart_height(chart)
    draw_chart(chart, height=height + room if height is not None else "content")


def failure_reason(exc: BaseException) -> str:
    """What went wrong, in one line a reader of the page can act on; never a traceback."""
    if isinstance(exc, duckdb.IOException) and catalog.moved_file(exc):
        return "a store file was replaced while it was being read"
    if isinstance(exc, duckdb.Error):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"the store could not answer ({first[:240]})"
    if isinstance(exc, OSError):
        return f"the store could not be read ({exc.strerror or exc})"
    return f"an unexpected {type(exc).__name__} occurred"


def show_failure(page_title: str, exc: BaseException) -> None:
    """Replaces a traceback by a sentence (what failed, that it is retried) and a retry button.

    The full traceback goes to the dashboard server's log, where an operator looks for it.
    """
    logger.error("turnlens dashboard: the %s page failed", page_title, exc_info=exc)
    st.error(
        f"The {page_title} page could not be shown: {failure_reason(exc)}. "
        f"It is retried in {RETRY_S} s, or now with the button below.",
        icon=":material/error:",
    )
    st.button("Retry now", icon=":material/refresh:", on_click=data.refresh, key="failure_retry")
    _retry_soon()


@st.fragment(run_every=RETRY_S)
def _retry_soon() -> None:
    """Reruns the whole page once RETRY_S passed; the fragment's first call is part of the failed run."""
    if st.session_state.get("_retry_armed"):
        st.session_state["_retry_armed"] = False
        data.refresh()
        st.rerun(scope="app")
    st.session_state["_retry_armed"] = True
