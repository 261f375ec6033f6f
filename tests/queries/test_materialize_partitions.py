"""The partitioned derived state answers exactly as the live views do, whatever order spans arrive in.

Given rows written as segments in stages (each stage a new segment received at a known moment), a refresh
after each stage must leave every derived view equal to the same view computed live from all the stored
copies, and must rewrite only the partitions the stage touched: late spans, retried exports, spans of a
turn whose partition was already written (and rolled up into its hour), idempotency keys shared across
turns, links into an older partition, retention dropping a day, and a rebuild after the inputs of the
views changed. test_materialize_partition_reads.py holds the tests of what each run and each read opens.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from stagedstore import HOUR_MS, MINUTE_MS, T0_MS, StagedStore, by_day, received_ns, shifted
from turnlens.collector import compaction
from turnlens.queries import catalog
from turnlens.queries import manifest as derived_manifest

pytestmark = pytest.mark.slow  # each test runs several materialiser passes (~10 s on a quiet machine)


def test_late_spans_and_retried_exports_refresh_only_their_partition(
    staged: StagedStore, contract_turn: Any
) -> None:
    early = contract_turn(turn="early", key="k-early", trace="te", session="s-early")
    late_turn = shifted(
        contract_turn(turn="late", key="k-late", trace="tl", session="s-late", charged=False), 5 * MINUTE_MS
    )
    tool_spans = [row for row in late_turn if row["layer"] == "tool"]
    staged.send(early + [row for row in late_turn if row not in tool_spans], at_ms=5 * MINUTE_MS + 4000)
    first = staged.refresh(5 * MINUTE_MS + 5000)
    assert first["mode"] == "full"
    staged.assert_equal_to_live()
    before = staged.partitions()
    assert len(before) == 2, "two turns five minutes apart: two minute partitions"
    assert "unbilled_side_effect" not in staged.kinds("late"), "nothing committed yet"

    # the tool layer's spans arrive late: the turn's findings change, the other partition is left alone
    staged.send(tool_spans, at_ms=5 * MINUTE_MS + 8000)
    second = staged.refresh(5 * MINUTE_MS + 9000)
    assert second["mode"] == "refresh" and second["touched_turns"] == 1
    staged.assert_equal_to_live()
    assert "unbilled_side_effect" in staged.kinds("late")
    after = staged.partitions()
    [early_part] = [part for part in before if before[part] == after[part]]
    assert len(second["written_partitions"]) == 1 and early_part not in second["written_partitions"]

    # an exporter retries the whole late turn: the copies are counted once, nothing changes but the version
    derived = staged.assert_equal_to_live()
    staged.send(late_turn, at_ms=5 * MINUTE_MS + 12_000)
    third = staged.refresh(5 * MINUTE_MS + 13_000)
    assert third["mode"] == "refresh" and third["written_partitions"] == second["written_partitions"]
    assert staged.assert_equal_to_live() == derived


def test_a_turn_whose_hour_was_rolled_up_takes_late_spans(staged: StagedStore, contract_turn: Any) -> None:
    old = contract_turn(turn="old", key="k-old", trace="to", session="s-old", charged=False)
    other = shifted(contract_turn(turn="other", key="k-other", trace="tx", session="s-other"), 30 * MINUTE_MS)
    missing = [row for row in old if row["layer"] == "tool"]
    staged.send([row for row in old if row not in missing] + other, at_ms=31 * MINUTE_MS)
    staged.refresh(31 * MINUTE_MS)
    assert all(len(part) == len("YYYYMMDDTHHMM") for part in staged.partitions()), "recent: minute partitions"

    # two hours later the hour is cold: its minute partitions became one hour partition, rows moved as they
    # were
    rolled = staged.refresh(3 * HOUR_MS)
    assert rolled["mode"] == "refresh" and rolled["touched_turns"] == 0
    hours = staged.partitions()
    assert all(len(part) == len("YYYYMMDDTHH") for part in hours)
    staged.assert_equal_to_live()

    # the old turn's tool spans arrive now: its hour partition is rewritten with them
    staged.send(missing, at_ms=3 * HOUR_MS + 1000)
    late = staged.refresh(3 * HOUR_MS + 2000)
    assert late["touched_turns"] == 1 and len(late["written_partitions"]) == 1
    assert late["written_partitions"][0] == time.strftime("%Y%m%dT%H", time.gmtime(T0_MS / 1000))
    staged.assert_equal_to_live()
    assert "unbilled_side_effect" in staged.kinds("old")


def test_an_idempotency_key_shared_with_an_older_partition_refreshes_both(
    staged: StagedStore, contract_turn: Any
) -> None:
    # turn A committed an invoice with key k-shared and was never charged: unbilled, until a charge for the
    # same
    # key arrives in another turn's trace ten minutes later (keys are unique across turns, call ids are not)
    turn_a = contract_turn(turn="turnA", trace="ta", session="s-a", key="k-shared", charged=False)
    staged.send(turn_a, at_ms=20_000)
    staged.refresh(21_000)
    assert "unbilled_side_effect" in staged.kinds("turnA")
    before = staged.partitions()

    turn_b = shifted(contract_turn(turn="turnB", trace="tb", session="s-b", key="k-shared"), 10 * MINUTE_MS)
    staged.send(turn_b, at_ms=10 * MINUTE_MS + 5000)
    refreshed = staged.refresh(10 * MINUTE_MS + 6000)
    assert refreshed["touched_turns"] == 2
    assert set(before) <= set(refreshed["written_partitions"]), "turn A's older partition is rewritten too"
    staged.assert_equal_to_live()
    assert "unbilled_side_effect" not in staged.kinds("turnA")


def test_a_key_only_a_span_event_carries_refreshes_the_turn_sharing_it(
    staged: StagedStore, contract_turn: Any, span: Any, builders: SimpleNamespace
) -> None:
    # as above, but the charge in the later turn is a billing service's span whose only mention of the key is
    # its billing.charged event: the spans' attributes never name it
    turn_a = contract_turn(turn="turnA", trace="ta", session="s-a", key="k-event", charged=False)
    staged.send(turn_a, at_ms=20_000)
    staged.refresh(21_000)
    assert "unbilled_side_effect" in staged.kinds("turnA")

    at = 10 * MINUTE_MS
    charged = builders.event(
        "billing.charged",
        at + 10,
        hlc_at=at + 10,
        **{
            "turnlens.idempotency_key": "k-event",
            "gen_ai.tool.call.id": "call-c",
            "turnlens.billing.kind": "side_effect",
            "turnlens.billing.amount": 0.5,
        },
    )
    charge = span(
        "charge",
        at,
        at + 20,
        trace="tc",
        session="s-c",
        turn="turnC",
        layer="billing",
        hlc_at=at,
        events=[charged],
    )
    staged.send([charge], at_ms=at + 5000)
    refreshed = staged.refresh(at + 6000)
    assert refreshed["touched_turns"] == 2
    staged.assert_equal_to_live()
    assert "unbilled_side_effect" not in staged.kinds("turnA")


def test_a_trace_linking_into_an_older_partition_joins_that_turn(
    staged: StagedStore, contract_turn: Any, span: Any
) -> None:
    turn = contract_turn(turn="linked", key="k-linked", trace="tk", session="s-k")
    staged.send(turn, at_ms=10_000)
    staged.refresh(11_000)
    with catalog.connect(staged.dir) as con:
        [before] = con.execute("select spans, traces from turns where turn_id = 'linked'").fetchall()

    # a background job's trace names no turn; it links to the turn's trace and so belongs to it (its
    # partition is
    # older than the job's own start)
    job = [
        span(
            "background.job",
            4 * MINUTE_MS,
            4 * MINUTE_MS + 500,
            trace="job",
            session=None,
            turn=None,
            layer="runtime",
            links=[("tk", "http")],
        ),
    ]
    staged.send(job, at_ms=4 * MINUTE_MS + 1000)
    refreshed = staged.refresh(4 * MINUTE_MS + 2000)
    assert refreshed["mode"] == "refresh" and refreshed["touched_turns"] == 1
    staged.assert_equal_to_live()
    with catalog.connect(staged.dir) as con:
        [after] = con.execute("select spans, traces from turns where turn_id = 'linked'").fetchall()
    assert after == (before[0] + 1, before[1] + 1), "one more span, one more trace"


def test_retention_drops_a_days_partitions_without_a_rebuild(staged: StagedStore, contract_turn: Any) -> None:
    first_day = contract_turn(turn="day1", key="k-day1", trace="d1", session="s-d1")
    # a turn that starts before midnight and ends after: retention takes its first part with the first day
    crossing_ms = (24 - 11) * HOUR_MS - 6 * MINUTE_MS - 40_000 - 500
    crossing = shifted(
        contract_turn(turn="midnight", key="k-midnight", trace="dm", session="s-dm"), crossing_ms
    )
    second_day = shifted(contract_turn(turn="day2", key="k-day2", trace="d2", session="s-d2"), 20 * HOUR_MS)
    staged.send(first_day + crossing + second_day, at_ms=20 * HOUR_MS + 5000)
    staged.refresh(20 * HOUR_MS + 6000)
    assert len(by_day(crossing)) == 2, "the crossing turn has spans on both days"
    derived = staged.assert_equal_to_live()
    assert {turn for _, turn, *_ in derived["turns"]} >= {"day1", "midnight", "day2"}

    # retention: every segment of the first day is deleted (no grace, as a sweep after it)
    now = time.time()
    first = dt.datetime.combine(dt.date(2026, 11, 19), dt.time(12), tzinfo=dt.UTC)
    assert compaction.apply_retention(staged.dir / "segments", now - first.timestamp(), grace_s=0) == 1
    dropped = staged.refresh(20 * HOUR_MS + 10_000)
    assert dropped["mode"] == "refresh" and dropped["gone_segments"] == 1 and dropped["dropped_partitions"]
    after = staged.assert_equal_to_live()
    turns = {turn for _, turn, *_ in after["turns"]}
    assert "day1" not in turns and {"midnight", "day2"} <= turns


def test_a_change_of_the_views_inputs_rebuilds_partition_by_partition(
    staged: StagedStore, contract_turn: Any
) -> None:
    turns = [
        shifted(
            contract_turn(turn=f"t{i}", key=f"k-{i}", trace=f"tr{i}", session=f"s{i}", tier=None),
            i * 7 * MINUTE_MS,
        )
        for i in range(4)
    ]
    staged.send([row for turn in turns for row in turn], at_ms=30 * MINUTE_MS)
    built = staged.refresh(30 * MINUTE_MS + 1000, bucket_spans=10)
    assert built["mode"] == "full" and built["buckets"] == 4
    staged.assert_equal_to_live()
    assert staged.kinds("t0") == ["untiered_tool"]

    # the tool registry gives the tool a tier: every side effect's tier changes, the derived state is stale
    (staged.dir / "tool_registry.toml").write_text('[tools.send_invoice]\ntier = "soft_irreversible"\n')
    catalog.write_catalog(staged.dir, staged.glob)
    with catalog.connect(staged.dir) as con:
        assert con.execute("select partitions, complete from turnlens_snapshot").fetchall() == [(0, False)]
    rebuilt = staged.refresh(30 * MINUTE_MS + 2000, bucket_spans=10)
    assert rebuilt["mode"] == "full" and rebuilt["buckets"] == 4
    staged.assert_equal_to_live()
    assert staged.kinds("t0") == []
    with catalog.connect(staged.dir) as con:
        assert con.execute(
            "select partitions, partitions_total, complete from turnlens_snapshot"
        ).fetchall() == [(4, None, True)]


def test_the_loops_first_run_on_a_small_store_is_one_refresh_from_nothing(
    staged: StagedStore, contract_turn: Any, tmp_path: Path, builders: SimpleNamespace
) -> None:
    """The collector's materialiser starting on a store of a few turns publishes its first version once, as a
    refresh that takes every copy as new, not as a full build; that version and the refreshes after it are
    what the live views compute. A store larger than a bucket still gets the full build."""
    early = contract_turn(turn="early", key="k-early", trace="te", session="s-early")
    late = shifted(contract_turn(turn="late", key="k-late", trace="tl", session="s-late"), 5 * MINUTE_MS)
    staged.send(early, at_ms=5 * MINUTE_MS + 4000)
    first = staged.refresh(5 * MINUTE_MS + 5000, bootstrap=True)
    assert first["mode"] == "bootstrap" and first["touched_turns"] == 1
    published = sorted(path.name for path in (staged.dir / "derived" / "manifests").glob("v*.json"))
    assert published == [f"v{first['version']}.json"], "one version published"
    staged.assert_equal_to_live()

    staged.send(late, at_ms=5 * MINUTE_MS + 8000)
    second = staged.refresh(5 * MINUTE_MS + 9000, bootstrap=True)
    assert second["mode"] == "refresh" and second["touched_turns"] == 1
    staged.assert_equal_to_live()

    larger = StagedStore(tmp_path / "larger", builders)
    larger.send(early, at_ms=4000)
    assert larger.refresh(5000, bootstrap=True, bucket_spans=1)["mode"] == "full"
    larger.assert_equal_to_live()


def test_a_store_that_has_received_no_span_yet_is_refreshed_and_read(
    staged: StagedStore, contract_turn: Any
) -> None:
    # the collector's loop starts before the first export arrives (seen on a loaded machine): each run
    # publishes a state of no turn that the catalogue reads, and the first spans are refreshed into it
    for at_ms in (1000, 2000):
        assert staged.refresh(at_ms, bootstrap=True)["touched_turns"] == 0
        with catalog.connect(staged.dir) as con:
            assert con.execute("select count(*) from turns").fetchall() == [(0,)]
    staged.send(contract_turn(turn="first", trace="tf", session="s-f", key="k-f"), at_ms=3000)
    assert staged.refresh(4000, bootstrap=True)["touched_turns"] == 1
    staged.assert_equal_to_live()


def test_a_refresh_with_no_new_copy_recomputes_nothing_and_moves_the_watermark(
    staged: StagedStore, contract_turn: Any
) -> None:
    """A loop on a store nobody sends to (a quiet night) runs every second: with no copy to take and no
    segment gone, no turn's rows can change, so it publishes the state as it stands, covering up to now,
    without the recomputation (~0.4 CPU s of planning a run, half a core for nothing)."""
    staged.send(contract_turn(turn="t", trace="tt", session="s-t", key="k-t"), at_ms=2 * MINUTE_MS)
    staged.refresh(2 * MINUTE_MS + 1000)
    idle = staged.refresh(3 * MINUTE_MS)
    assert idle["mode"] == "refresh"
    assert (idle["new_copies"], idle["touched_turns"], idle["input_copies"]) == (0, 0, 0)
    assert not [step for step in idle["step_seconds"] if step.startswith("hold ")], "nothing recomputed"
    snapshot = derived_manifest.current_snapshot(staged.dir)
    assert snapshot is not None and snapshot.watermark == received_ns(3 * MINUTE_MS) + 1
    staged.assert_equal_to_live()

    # the next copy is taken as before: a retried export of the turn's spans
    staged.send(contract_turn(turn="t", trace="tt", session="s-t", key="k-t"), at_ms=3 * MINUTE_MS + 500)
    again = staged.refresh(3 * MINUTE_MS + 1000)
    assert again["new_copies"] > 0 and again["touched_turns"] == 1
    staged.assert_equal_to_live()


def _a_straggler_after_a_refresh(staged: StagedStore, contract_turn: Any) -> None:
    """A turn refreshed at 11 s, then a request received at 10.5 s whose segment became durable only after
    that refresh listed the store."""
    staged.send(contract_turn(turn="first", key="k-first", trace="tf", session="s-f"), at_ms=10_000)
    staged.refresh(11_000)
    straggler = shifted(contract_turn(turn="slow", key="k-slow", trace="ts", session="s-s"), 5000)
    staged.send(straggler, at_ms=10_500)


def _refreshed_with_the_straggler(staged: StagedStore) -> dict[str, Any]:
    refreshed = staged.refresh(12_000)
    derived = staged.assert_equal_to_live()
    assert {turn for _, turn, *_ in derived["turns"]} == {"first", "slow"}
    return refreshed


def test_a_copy_stamped_before_the_watermark_but_stored_after_it_is_not_missed(
    staged: StagedStore, contract_turn: Any
) -> None:
    _a_straggler_after_a_refresh(staged, contract_turn)
    assert _refreshed_with_the_straggler(staged)["touched_turns"] == 1


def test_a_straggler_merged_before_a_refresh_saw_it_is_not_missed_when_the_merges_sources_are_gone(
    staged: StagedStore, contract_turn: Any
) -> None:
    # the refresh takes the copies of a segment it never saw whole, whatever their received time: that holds
    # no timing margin between a copy's receipt and its segment, and compaction must not hide such a segment
    _a_straggler_after_a_refresh(staged, contract_turn)
    root = staged.dir / "segments"
    merged = compaction.compact(root, min_segments=2, grace_s=3600)
    assert merged.merged_segments == 1
    # a sweep deleted the merge's sources and died before rewriting the manifest, which still names the merge
    sources = [path for path in root.rglob("stage-*.parquet") if compaction.MERGE_MARK not in path.name]
    assert len(sources) == 2
    for path in sources:
        path.unlink()
    assert compaction.merged_outputs(root) == set()
    assert _refreshed_with_the_straggler(staged)["touched_turns"] >= 1
