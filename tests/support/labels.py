"""Reading the simulator's labels against the detectors: the labels name every call of an untiered tool,
while `untiered_tool` is one finding per tool and UTC day (the simulator has one untiered tool)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

UNTIERED = "untiered_tool"
DAY_NS = 86_400 * 10**9


def split_untiered(labels: dict[str, Any], found: Iterable[Sequence[Any]]) -> list[Sequence[Any]]:
    """Checks the untiered_tool findings (one per day, each on a labelled call of that day) and returns the
    other findings, to compare with the other labels row for row. Rows start with (kind, session, turn)."""
    day_of = {(t["session_id"], t["turn_id"]): t["started_unix_nano"] // DAY_NS for t in labels["turns"]}
    labelled = {(f["session_id"], f["turn_id"]) for f in labels["findings"] if f["kind"] == UNTIERED}
    rows = list(found)
    untiered = [(row[1], row[2]) for row in rows if row[0] == UNTIERED]
    assert set(untiered) <= labelled, "an untiered_tool finding on a turn with no untiered call"
    assert sorted(day_of[turn] for turn in untiered) == sorted({day_of[turn] for turn in labelled})
    return [row for row in rows if row[0] != UNTIERED]
