"""Durations and times as users type them: `30d`, `12h`, `1h30m`, `250ms`, an ISO-8601 moment.

One parser serves every setting and flag (retention, compaction and materialisation intervals, alert
`for` clauses, `--every`), so a duration that one command accepts every other command accepts too.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d|w)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}
_BARE_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")


def parse_seconds(text: str) -> float:
    """Seconds in a duration such as "30d", "12h", "90s", "1h30m", "250ms" or a bare number of seconds."""
    cleaned = text.strip().lower()
    if _BARE_NUMBER.fullmatch(cleaned):
        return float(cleaned)
    parts = _PART.findall(cleaned)
    if not parts or _PART.sub("", cleaned).strip():
        raise ValueError(f"not a duration: {text!r} (expected e.g. 30d, 12h, 15m, 90s, 250ms)")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def parse_duration(text: str) -> timedelta:
    """The same durations as `parse_seconds`, as a timedelta."""
    return timedelta(seconds=parse_seconds(text))


def format_duration(delta: timedelta) -> str:
    """The shortest of `2h`, `5m`, `90s` that says the whole seconds of `delta` exactly."""
    seconds = int(delta.total_seconds())
    if seconds and seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds and seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"


def parse_time(text: str) -> datetime:
    """An ISO-8601 time; a time without an offset is taken as UTC. Returned in UTC."""
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
