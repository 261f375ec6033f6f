"""The one "now" that alert rules and the dashboard's time windows end at.

By default both end at the wall clock: a live store is judged as it stands, and a fleet that stopped sending
shows as silence. Recorded data (an ingested file, a store copied from an incident) is read "as of" another
time, given the same way to `turnlens alerts run --at` and to the dashboard's `?asof=`:

    now                  the wall clock (the default)
    newest               the newest data in the store: the last span of the newest turn
    newest-30m, now-1h   either, moved by a duration (s, m, h, d)
    2026-01-01T09:20:00Z an ISO-8601 time (UTC when it has no offset)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime

import duckdb
from turnlens.kernel.durations import parse_duration, parse_time
from turnlens.queries import catalog

NOW = "now"
NEWEST = "newest"
# The named query the runner and the dashboard both read the newest data from (queries/named/store_bounds.sql)
STORE_BOUNDS = "store_bounds"
_RELATIVE = re.compile(r"^(now|newest)\s*(?:([+-])\s*(\S+))?$")


class AsOfError(ValueError):
    """A time that is neither now, newest (± a duration) nor an ISO-8601 time; or newest of an empty store."""


def check(text: str) -> str:
    """`text` stripped, once known to be a valid as-of (nothing is read); raises AsOfError otherwise."""
    text = text.strip()
    match = _RELATIVE.match(text)
    try:
        if match:
            if match.group(3):
                parse_duration(match.group(3))
        else:
            parse_time(text)
    except ValueError as exc:
        raise AsOfError(
            f"{text!r} is not a time: use now, newest, newest-30m or an ISO-8601 time ({exc})"
        ) from exc
    return text


def needs_store(text: str) -> bool:
    return text.strip().startswith(NEWEST)


def resolve(text: str, newest: Callable[[], datetime | None], wall: datetime | None = None) -> datetime:
    """The instant `text` names; `newest()` is asked only when it names the newest data."""
    text = check(text)
    match = _RELATIVE.match(text)
    if not match:
        return parse_time(text)
    if match.group(1) == NOW:
        base = wall or datetime.now(UTC)
    else:
        found = newest()
        if found is None:
            raise AsOfError("the store holds no turns yet, so it has no newest data")
        base = found
    if match.group(3):
        shift = parse_duration(match.group(3))
        base = base + shift if match.group(2) == "+" else base - shift
    return base


def newest_data(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """The newest data of a store: when the last span of its newest turn was seen (wall clock, UTC)."""
    result = catalog.run_named(con, STORE_BOUNDS, {})
    columns = [column[0] for column in result.description or ()]
    row = result.fetchone()
    newest = row[columns.index("newest_ms")] if row else None
    if newest is None:
        return None
    return datetime.fromtimestamp(int(newest) / 1000, tz=UTC)


def describe(text: str) -> str:
    """How a page or a log line names the as-of: "the wall clock", "the newest data", or the time given."""
    text = text.strip()
    if text == NOW:
        return "the wall clock"
    if text == NEWEST:
        return "the newest data in the store"
    return f"`{text}`"

