"""Widgets whose values live in the URL query string, so a link pasted in an incident channel opens the view.

Each widget reads its first value from `st.query_params` and writes its current value back; a value
equal to its default is left out of the URL to keep links short.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

# Time windows end at the newest data in the store, so a recorded incident reads the same as a live one.
TIME_RANGES: dict[str, int | None] = {
    "all": None,
    "15m": 15 * 60,
    "1h": 3600,
    "6h": 6 * 3600,
    "24h": 24 * 3600,
    "7d": 7 * 24 * 3600,
}


def _write(param: str, value: str | list[str], default: str | list[str]) -> None:
    if value == default or value == [] or value == "":
        if param in st.query_params:
            del st.query_params[param]
    else:
        st.query_params[param] = value


def unknown_value(param: str, values: Sequence[str], fallback: str) -> None:
    """Says that a link carried values this page does not know, and what it shows instead."""
    shown = ", ".join(f"`{v}`" for v in values)
    st.warning(
        f"Unknown value{'s' if len(values) > 1 else ''} {shown} for `{param}` in the link; {fallback}.",
        icon=":material/link_off:",
    )


def selectbox(label: str, options: Sequence[str], *, param: str, default: str, **kwargs: Any) -> str:
    """A selectbox bound to `?param=value`; a value the options lack is reported and the default shown."""
    options = list(options)
    wanted = st.query_params.get(param, default)
    if wanted not in options:
        unknown_value(param, [wanted], f"showing `{default}`")
    index = options.index(wanted) if wanted in options else options.index(default)
    value = st.selectbox(label, options, index=index, key=f"url_{param}", **kwargs)
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


def text_input(label: str, *, param: str, **kwargs: Any) -> str:
    """A text box bound to `?param=text`."""
    value = st.text_input(label, value=st.query_params.get(param, ""), key=f"url_{param}", **kwargs)
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


def time_range(*, param: str = "range", default: str = "all") -> str:
    """The time-window picker every list page shares."""
    return selectbox(
        "Time range",
        list(TIME_RANGES),
        param=param,
        default=default,
        help="Windows end at the newest data in the store, so a recorded incident reads like a live one.",
    )
