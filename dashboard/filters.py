"""Widgets whose values live in the URL query string, so a link pasted in an incident channel opens the view.

Each widget reads its first value from `st.query_params` and writes its current value back; a value
equal to its default is left out of the URL to keep links short.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import streamlit as st
from turnlens.alerts import asof

# Time windows end at the dashboard's "as of" (`?asof=`): the wall clock by default, as `turnlens alerts run`
# evaluates, or `newest` (the newest data in the store) or a time for recorded data (alerts/asof.py).
TIME_RANGES: dict[str, int | None] = {
    "all": None,
    "15m": 15 * 60,
    "1h": 3600,
    "6h": 6 * 3600,
    "24h": 24 * 3600,
    "7d": 7 * 24 * 3600,
}
CUSTOM = "custom"  # an absolute window: ?from=…&to=… (ISO-8601, UTC when no offset is given)
AS_OF = "asof"
RANGE_PARAMS = ("range", "from", "to", AS_OF)
_SHARED = "shared_time_range"
_BRUSH = "brushed_time_range"
_LAST_BRUSH = "last_brushed_time_range"  # session state: the time range follows the user from page to page


def _write(param: str, value: str | list[str], default: str | list[str]) -> None:
    if value == default or value == [] or value == "":
        if param in st.query_params:
            del st.query_params[param]
    else:
        st.query_params[param] = value


class _Run(threading.local):
    """Per script run (Streamlit runs each in a thread of its own): where link notices go."""

    notices: Any = None
    page: str = ""


_run = _Run()


def notice_area(page: str) -> None:
    """Makes the top of the page the place link notices appear (app.py calls it before each page runs)."""
    _run.notices = st.container()
    _run.page = page


def unknown_value(param: str, values: Sequence[str], fallback: str) -> None:
    """Says, at the top of the page, that a link carried values this page does not know and what it shows."""
    shown = ", ".join(f"`{v}`" for v in values)
    (_run.notices or st).warning(
        f"Unknown value{'s' if len(values) > 1 else ''} {shown} for `{param}` in the link; {fallback}.",
        icon=":material/link_off:",
    )


def selectbox(
    label: str, options: Sequence[str], *, param: str, default: str, key: str | None = None, **kwargs: Any
) -> str:
    """A selectbox bound to `?param=value`; a value the options lack is reported and the default shown."""
    options = list(options)
    wanted = st.query_params.get(param, default)
    if wanted not in options:
        unknown_value(param, [wanted], f"showing `{default}`")
    key = key or f"url_{param}"
    if key in st.session_state and st.session_state[key] in options:  # changed by the user
        value = st.selectbox(label, options, key=key, **kwargs)
    else:
        st.session_state.pop(key, None)
        index = options.index(wanted) if wanted in options else options.index(default)
        value = st.selectbox(label, options, index=index, key=key, **kwargs)
    _write(param, value, default)
    return str(value)


def multiselect(
    label: str, options: Sequence[str], *, param: str, strict: bool = False, **kwargs: Any
) -> list[str]:
    """A multiselect bound to `?param=a&param=b`.

    Values the options lack are kept (a link may name a tool not seen lately), unless `strict`: the options
    are then every value there is (statuses, finding kinds, tiers), and the others are reported and dropped.
    """
    wanted = st.query_params.get_all(param)
    if strict:
        unknown = [v for v in wanted if v not in options]
        if unknown:
            unknown_value(param, unknown, "ignoring " + ("them" if len(unknown) > 1 else "it"))
            wanted = [v for v in wanted if v in options]
    options = list(dict.fromkeys([*options, *wanted]))
    value = st.multiselect(label, options, default=wanted, key=f"url_{param}", **kwargs)
    _write(param, list(value), [])
    return list(value)


def text_input(label: str, *, param: str, key: str | None = None, **kwargs: Any) -> str:
    """A text box bound to `?param=text`."""
    key = key or f"url_{param}"
    if key in st.session_state:  # changed by the user
        value = st.text_input(label, key=key, **kwargs)
    else:
        value = st.text_input(label, value=st.query_params.get(param, ""), key=key, **kwargs)
    _write(param, value.strip(), "")
    return value.strip()


def toggle(label: str, *, param: str, default: bool = False, **kwargs: Any) -> bool:
    """A toggle bound to `?param=1` / `?param=0`."""
    raw = st.query_params.get(param)
    if raw is not None and raw not in ("1", "0", "true", "false", "yes", "no"):
        unknown_value(param, [raw], f"showing it {'on' if default else 'off'} (use 1 or 0)")
        raw = None
    initial = default if raw is None else raw in ("1", "true", "yes")
    value = st.toggle(label, value=initial, key=f"url_{param}", **kwargs)
    _write(param, "1" if value else "0", "1" if default else "0")
    return bool(value)


def time_range(*, default: str = "all") -> str:
    """The time-window picker every list page shares: a window ending at the newest data, or from/to.

    The choice is kept in the URL (`?range=1h`, or `?from=…&to=…`) and in the session, so moving to another
    page through the sidebar keeps it; a link that names a range always wins. The widgets' keys are the
    page's own: the URL, not another page's widget, gives a page its first value.
    """
    keys = {param: f"url_{param}_{_run.page}" for param in RANGE_PARAMS}
    _restore_shared_range()
    _apply_brush(keys)
    if keys["range"] not in st.session_state and (st.query_params.get("from") or st.query_params.get("to")):
        st.query_params["range"] = CUSTOM  # a link with from/to means an absolute window
    range_key = selectbox(
        "Time range",
        [*TIME_RANGES, CUSTOM],
        param="range",
        default=default,
        key=keys["range"],
        help="Windows end at the time 'As of' names (the wall clock unless it says otherwise), as the alert "
        "rules do; `custom` takes an absolute from/to (or brush the SLO chart on the Overview).",
    )
    if range_key == CUSTOM:
        text_input("From (UTC)", param="from", key=keys["from"], placeholder="2026-01-01T09:05:00")
        text_input("To (UTC)", param="to", key=keys["to"], placeholder="2026-01-01T09:20:00")
        if AS_OF in st.query_params:
            del st.query_params[AS_OF]
    else:
        for param in ("from", "to"):
            if param in st.query_params:
                del st.query_params[param]
        text_input(
            "As of (UTC)",
            param=AS_OF,
            key=keys[AS_OF],
            placeholder="now",
            help="Where windows end: `now` (the wall clock, the default), `newest` (the newest data in the "
            "store, for recorded data), `newest-30m`, or a time such as 2026-01-01T09:20:00. "
            "`turnlens alerts run --at` takes the same.",
        )
    st.session_state[_SHARED] = range_params()
    return range_key


def as_of() -> str:
    """What `?asof=` names (`now` when absent); a value that is not a time is reported and `now` used."""
    raw = st.query_params.get(AS_OF, "").strip()
    if not raw:
        return asof.NOW
    try:
        return asof.check(raw)
    except asof.AsOfError:
        unknown_value(AS_OF, [raw], "windows end now (use now, newest, newest-30m or an ISO-8601 time)")
        return asof.NOW


def range_params() -> dict[str, str]:
    """The time range's query parameters as they stand, for links to other pages."""
    return {p: st.query_params[p] for p in RANGE_PARAMS if st.query_params.get(p)}


def set_custom_range(start_ms: float, end_ms: float) -> None:
    """Makes [start, end] the time range (a brush on a chart) and reruns the page on it.

    The widgets already drew this run, so the window is applied at the start of the next (time_range).
    """
    brushed = (float(start_ms), float(end_ms))
    if st.session_state.get(_LAST_BRUSH) == brushed:  # the chart keeps its selection across reruns
        return
    st.session_state[_BRUSH] = st.session_state[_LAST_BRUSH] = brushed
    st.rerun()


def _apply_brush(keys: dict[str, str]) -> None:
    """A brushed window becomes the URL's, and the widgets start again from it."""
    brushed = st.session_state.pop(_BRUSH, None)
    if brushed is None:
        return
    for param, ms in zip(("from", "to"), brushed, strict=True):
        st.query_params[param] = datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    st.query_params["range"] = CUSTOM
    for key in keys.values():
        st.session_state.pop(key, None)


def custom_window() -> tuple[int | None, int | None]:
    """`(from_ms, to_ms)` of `?from=…&to=…`; a value that is not a time is reported and left open."""
    return _parse_ms("from"), _parse_ms("to")


def _parse_ms(param: str) -> int | None:
    raw = st.query_params.get(param, "").strip()
    if not raw:
        return None
    try:
        at = datetime.fromisoformat(raw)
    except ValueError:
        unknown_value(param, [raw], "leaving that end open (use ISO-8601, e.g. 2026-01-01T09:05:00Z)")
        return None
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    return int(at.timestamp() * 1000)


def _restore_shared_range() -> None:
    """A page opened without a range in its URL takes the one chosen on the previous page."""
    if any(p in st.query_params for p in RANGE_PARAMS):
        return
    for param, value in (st.session_state.get(_SHARED) or {}).items():
        st.query_params[param] = value
