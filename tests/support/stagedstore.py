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
        derived = snapshot_rows(self.dir)
        assert derived == plain_rows(self.dir)
        return derived

    def kinds(self, turn: str) -> list[str]:
        with catalog.connect(self.dir) as con:
            return [
                k
                for (k,) in con.execute(
                    "select kind from divergences where turn_id = ? order by kind", [turn]
                ).fetchall()
            ]


# each derived view as the catalogue defines it without derived state: computed from every stored copy now
LIVE = {
    "side_effects": "side_effects_of('turn_events')",
    "cancel_acks": "cancel_acks_of('turn_events')",
    "layer_verdicts": "layer_verdicts_of('turn_events')",
    "divergences": "divergences_of('turn_events')",
    "turn_usage": "turn_usage_of('turn_events', 'live_cancel_acks')",
    "turns": "turns_of('turn_events', 'side_effects', 'divergences', 'live_cancel_acks')",
    "turn_node_skew": "turn_node_skew_of('turn_events')",
    "tool_claims": "tool_claims_of('turn_events')",
}
# the store-wide views a store with derived state adds up from per-partition rollups and the partitions deltas
# touch: they must equal the same views over every turn's rows computed live
ROLLED_UP = (
    "node_skew_minutes",
    "node_skew_histogram",
    "node_skew",
    "tool_observed",
    "tool_audit",
    "turn_minutes",
    "finding_minutes",
)
# the live views the others read, held once each under its own name (a temporary table shadows the view of the
# same name for every view and macro that reads it; each of these views is `select * from` its LIVE macro):
# derived again by each reader, they cost seconds of planning on a small store (tool_audit reads tool_observed
# twice, which reads the ledger, the claims and the findings, each deriving turn_events again: 6-7 s of a
# test's 25). cancel_acks is held under another name: its view reads the spans on a path of its own
HELD = ("turn_events", "side_effects", "divergences")


def plain_rows(store: Path) -> dict[str, list[tuple]]:
    """Every row of the derived views computed live, in a catalogue of our own over the store's segments."""
    con = catalog.live_connection(store)
    for view in HELD:
        source = LIVE.get(view, f"main.{view}")
        con.execute(f"create temp table {view} as select * from {source}")
    con.execute(f"create temp table live_cancel_acks as select * from {LIVE['cancel_acks']}")
    rows = {
        view: con.execute(f"select * from {source} order by all").fetchall()
        for view, source in [*LIVE.items(), *zip(ROLLED_UP, ROLLED_UP, strict=True)]
    }
    con.close()
    return rows


def snapshot_rows(store: Path) -> dict[str, list[tuple]]:
    """Every row of the derived views as the store's catalogue shows them."""
    with catalog.connect(store) as con:
        return {
            view: con.execute(f"select * from {view} order by all").fetchall() for view in [*LIVE, *ROLLED_UP]
        }


def received_ns(ms: float) -> int:
    return int(round((T0_MS + ms) * 1_000_000))


def by_day(rows: list[dict]) -> dict[str, list[dict]]:
    days: dict[str, list[dict]] = {}
    for row in rows:
        day = dt.datetime.fromtimestamp(row["start_time_unix_nano"] / 1e9, tz=dt.UTC).date().isoformat()
        days.setdefault(day, []).append(row)
    return days
