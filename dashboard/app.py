"""The dashboard's entry script (`streamlit run app.py -- --store DIR`): navigation, refresh, store banner."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import streamlit as st
from PIL import Image, ImageDraw
from turnlens.dashboard import common, data, filters

# Altair validates every part of a chart against the Vega-Lite schema as it is built, then the whole chart
# again when Streamlit converts it: the first costs a second of the Overview's run on a loaded machine and
# finds nothing the second would not, so only the second is kept.
alt.utils.schemapi.disable_debug_mode()

PAGES_DIR = Path(__file__).resolve().parent / "pages"
REFRESH_CHOICES = {"off": 0, "10 s": 10, "30 s": 30, "1 min": 60, "5 min": 300}


def _icon() -> Image.Image:
    """A drawn favicon: a `:material/...:` or emoji icon would be fetched from a CDN; this one is local."""
    icon = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    draw = ImageDraw.Draw(icon)
    draw.ellipse((6, 6, 46, 46), outline=(214, 39, 40, 255), width=7)
    draw.line((40, 40, 60, 60), fill=(60, 60, 60, 255), width=9)
    return icon


st.set_page_config(page_title="turnlens", page_icon=_icon(), layout="wide")


OVERVIEW = st.Page(
    PAGES_DIR / "overview.py", title="Overview", icon=":material/monitoring:", url_path="overview"
)


def _open_overview() -> None:
    """The app's root: switches to the Overview, keeping the query (`/?range=1h` → `/overview?range=1h`)."""
    st.switch_page(OVERVIEW, query_params=st.query_params.to_dict())


pages = {
    "Incident review": [
        # The root opens the Overview at `/overview`: a default page's own path would read "Page not found".
        st.Page(_open_overview, title="turnlens", url_path="home", default=True, visibility="hidden"),
        OVERVIEW,
        st.Page(PAGES_DIR / "turns.py", title="Turns", icon=":material/list:", url_path="turns"),
        st.Page(
            PAGES_DIR / "turn_detail.py", title="Turn detail", icon=":material/timeline:", url_path="turn"
        ),
        st.Page(
            PAGES_DIR / "side_effects.py",
            title="Side effects",
            icon=":material/bolt:",
            url_path="side_effects",
        ),
    ],
    "Operations": [
        st.Page(PAGES_DIR / "tools.py", title="Tools", icon=":material/build:", url_path="tools"),
        st.Page(PAGES_DIR / "alerts.py", title="Alerts", icon=":material/notifications:", url_path="alerts"),
        st.Page(
            PAGES_DIR / "sql_console.py", title="SQL console", icon=":material/terminal:", url_path="sql"
        ),
    ],
}
page = st.navigation(pages)

settings = data.settings()
with st.sidebar:
    st.markdown("### :material/timeline: turnlens")
    st.caption(f"Store `{settings.store_dir}` (read-only)")
    if st.button("Refresh now", icon=":material/refresh:", width="stretch"):
        data.refresh()
        st.rerun()
    default_refresh = next((k for k, v in REFRESH_CHOICES.items() if v == settings.refresh_seconds), "off")
    every = REFRESH_CHOICES[
        filters.selectbox("Auto-refresh", list(REFRESH_CHOICES), param="refresh", default=default_refresh)
    ]

if every:

    @st.fragment(run_every=every)
    def _auto_refresh() -> None:
        """Reruns the whole page on the interval with fresh data; the first call is the page's own run."""
        if st.session_state.get("_refresh_armed"):
            data.refresh()
            st.rerun(scope="app")
        st.session_state["_refresh_armed"] = True

    st.session_state["_refresh_armed"] = False
    with st.sidebar:
        _auto_refresh()

st.session_state["_retry_armed"] = False  # a retry is armed again only by a page that fails this run
try:
    with st.spinner(f"Loading {page.title} …", show_time=True):  # a cold page can take a while on a big store
        filters.notice_area(page.url_path)
        page.run()
except data.StoreNotReady as exc:
    st.warning(str(exc), icon=":material/hourglass_empty:")
except Exception as exc:  # noqa: BLE001 - any failure becomes a sentence and a retry, never a traceback
    common.show_failure(page.title, exc)
