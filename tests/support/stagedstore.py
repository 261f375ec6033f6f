"""A store fed in stages, for the tests of the partitioned derived state (tests/queries).

Each stage is a new segment received at a known moment, each refresh the materialiser run a collector
would make then; `StagedStore.assert_equal_to_live` compares every derived view with the same view
computed live from every stored copy.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from derivedstate import ROLLED_UP, catalogue_rows, live_rows
from turnlens.kernel import contract as c
from turnlens.kernel.layout import segments_glob
from turnlens.kernel.schema import SEGMENT_SCHEMA
from turnlens.queries import catalog, materialize
from turnlens.queries import manifest as derived_manifest

T0_MS = 1_795_000_000_000  # the given rows' T0 (tests/queries/conftest.py): 2026-11-18 11:06:40 UTC
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS


def shifted(rows: list[dict], ms: int) -> list[dict]:
    """The same spans `ms` later: wall clocks, HLCs (columns and attributes) and event times moved
    together."""
    moved = copy.deepcopy(rows)
    delta_ns, delta_hlc = ms * 1_000_000, ms << c.HLC_LOGICAL_BITS
    for row in moved:
        row["start_time_unix_nano"] += delta_ns
        row["received_unix_nano"] += delta_ns
        if row["end_time_unix_nano"] is not None:
            row["end_time_unix_nano"] += delta_ns
        if row["hlc"] is not None:
            row["hlc"] += delta_hlc
        row["attributes"] = _shift_attributes(row["attributes"], delta_hlc)
        for event in row["events"]:
            event["time_unix_nano"] += delta_ns
            if event["hlc"] is not None:
                event["hlc"] += delta_hlc
            event["attributes"] = _shift_attributes(event["attributes"], delta_hlc)
    return moved


def _shift_attributes(text: str, delta_hlc: int) -> str:
    attributes = json.loads(text)
    if c.HLC in attributes:
        attributes[c.HLC] += delta_hlc
    return json.dumps(attributes)


def six_turns(
    contract_turn: Any, turn: str, trace: str, session: str, sharing: tuple[int, int]
) -> list[list[dict]]:
    """Six contract turns ten minutes apart (turn, trace and session named by prefix and number); the two
    `sharing` use one idempotency key, k-shared, and only the later charges it."""
    first, _ = sharing
    return [
        shifted(
            contract_turn(
                turn=f"{turn}{n}", trace=f"{trace}{n}", session=f"{session}{n}",
                key="k-shared" if n in sharing else f"k-{n}", charged=n != first,
            ),
            n * 10 * MINUTE_MS,
        )
        for n in range(6)
    ]


class StagedStore:
    """A store fed in stages: each `send` is one new segment whose copies were received at `at_ms` (after T0),
    each `refresh` the materialiser run of a collector at that moment."""

    def __init__(self, directory: Path, builders: SimpleNamespace) -> None:
        self.dir = builders.write_store(directory, [])
        self.glob = segments_glob(self.dir)
        self.segments = 0

    def send(self, rows: list[dict], at_ms: float) -> None:
        received = received_ns(at_ms)
        stamped = [row | {"received_unix_nano": received} for row in rows]
        for day, day_rows in by_day(stamped).items():
            folder = self.dir / "segments" / f"date={day}"
            folder.mkdir(parents=True, exist_ok=True)
            self.segments += 1
            table = pa.Table.from_pylist(day_rows, schema=SEGMENT_SCHEMA)
            pq.write_table(table, folder / f"stage-{self.segments:04d}.parquet")

    def refresh(self, at_ms: float, **options: Any) -> dict[str, Any]:
        now_ns = received_ns(at_ms) + 1
        return materialize.materialize(self.dir, self.glob, margin_s=0, now_ns=now_ns, **options)

    def partitions(self) -> dict[str, int]:
        """Each partition with the version that last wrote rows of it (its base file, or a delta)."""
        manifest = derived_manifest.current_snapshot(self.dir)
        assert manifest is not None
        return manifest.written_versions()

    def assert_equal_to_live(self) -> dict[str, list[tuple]]:
        views = (*derived_manifest.VIEWS, *ROLLED_UP)
        derived = catalogue_rows(self.dir, views)
        assert derived == live_rows(self.dir, views)
        return derived

    def kinds(self, turn: str) -> list[str]:
        with catalog.connect(self.dir) as con:
            return [
                k
                for (k,) in con.execute(
                    "select kind from divergences where turn_id = ? order by kind", [turn]
                ).fetchall()
            ]


def received_ns(ms: float) -> int:
    return int(round((T0_MS + ms) * 1_000_000))


def by_day(rows: list[dict]) -> dict[str, list[dict]]:
    days: dict[str, list[dict]] = {}
    for row in rows:
        day = dt.datetime.fromtimestamp(row["start_time_unix_nano"] / 1e9, tz=dt.UTC).date().isoformat()
        days.setdefault(day, []).append(row)
    return days
