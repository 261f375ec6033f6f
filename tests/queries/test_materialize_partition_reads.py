"""The partitioned derived state reads no more than it needs and stays equal to the live views.

A refresh reads the identity of only the partitions its turns reach, one turn's lookups open only the
partitions holding its rows, a full build's passes read only their units' segments and cut a large
partition in slices, and the store-wide sums read each settled partition's rollup: each answering as a
read of everything would (tests/support/stagedstore.py feeds the stores in stages;
test_materialize_partitions.py holds the orders of arrival).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest
from stagedstore import MINUTE_MS, T0_MS, StagedStore, shifted, six_turns
from turnlens.kernel import contract as c
from turnlens.queries import catalog, identity_index, materialize, turn_queries
from turnlens.queries import manifest as derived_manifest

pytestmark = pytest.mark.slow  # each test runs several materialiser passes (~10 s on a quiet machine)


def test_a_key_many_turns_share_recomputes_only_the_turns_its_findings_name(
    staged: StagedStore, contract_turn: Any
) -> None:
    """A client reusing one idempotency key for every call: each new turn carrying it is recomputed with the
    turn naming the key's duplicate_commit, not with every turn of the key (a refresh would otherwise read
    more of the store at each one), and the findings stay those the live views give."""

    def hot(turn: str, minute: int) -> list[dict]:
        rows = contract_turn(turn=turn, trace=f"t-{turn}", session=f"s-{turn}", key="k-hot")
        return shifted(rows, minute * MINUTE_MS)

    staged.send([row for n in range(12) for row in hot(f"h{n}", n * 5)], at_ms=61 * MINUTE_MS)
    staged.refresh(61 * MINUTE_MS + 1000, deltas_max=0)
    assert staged.kinds("h0") == ["duplicate_commit"]

    staged.send(hot("again", 70), at_ms=71 * MINUTE_MS)
    again = staged.refresh(71 * MINUTE_MS + 1000, deltas_max=0)
    assert again["touched_turns"] == 2, "again, and h0, whose duplicate_commit counts it"
    assert again["input_copies"] == 2 * len(hot("x", 0))
    assert "13 times" in _evidence(staged, "h0")
    staged.assert_equal_to_live()

    # a late turn whose acknowledgement came first takes the finding over: it and h0, which loses it
    staged.send(hot("earliest", -5), at_ms=72 * MINUTE_MS)
    earliest = staged.refresh(72 * MINUTE_MS + 1000, deltas_max=0)
    assert earliest["touched_turns"] == 2, "earliest, and h0"
    assert staged.kinds("earliest") == ["duplicate_commit"] and staged.kinds("h0") == []
    assert "14 times" in _evidence(staged, "earliest")
    staged.assert_equal_to_live()


def test_a_full_build_counts_the_other_units_turns_of_a_shared_key_by_their_facts_not_their_copies(
    staged: StagedStore, contract_turn: Any
) -> None:
    """A full build whose units each hold a turn of one reused key: each unit reads its own turns and the key
    facts of the others, computed once (a key-fact unit), rather than a copy of every turn of the key, which
    grew as units x turns of the key. The findings on the key stay those the live views give: one
    duplicate_commit for the eight executions, and no unbilled call, since one turn's charge covers the
    key."""

    def hot(turn: str, minute: int, charged: bool = False) -> list[dict]:
        ids = {"turn": turn, "trace": f"t-{turn}", "session": f"s-{turn}"}
        return shifted(contract_turn(**ids, key="k-hot", charged=charged), minute * MINUTE_MS)

    turns = [hot(f"h{n}", n * 10, charged=n == 5) for n in range(8)]
    solo = shifted(contract_turn(turn="solo", trace="t-solo", session="s-solo", key="k-solo"), 85 * MINUTE_MS)
    staged.send([row for turn in [*turns, solo] for row in turn], at_ms=90 * MINUTE_MS)
    size = len(solo)
    assert all(len(turn) == size for turn in turns)

    built = staged.refresh(90 * MINUTE_MS + 1000, full=True, bucket_spans=size)
    assert built["mode"] == "full" and built["units"] == 9, "a unit for each turn's partition"
    assert built["key_fact_turns"] == 8 and built["key_fact_units"] >= 1, "the key's turns, not solo"
    assert built["shuffle_copies"] == 9 * size + 8 * size, "each copy once, the key's turns twice"
    staged.assert_equal_to_live()
    assert staged.kinds("h0") == ["duplicate_commit"] and "8 times" in _evidence(staged, "h0")
    assert not any("unbilled_side_effect" in staged.kinds(f"h{n}") for n in range(8)), "h5's charge counts"

    # the facts the build kept are those a refresh counts: a new turn of the key is recomputed with h0 only
    staged.send(hot("again", 95), at_ms=96 * MINUTE_MS)
    again = staged.refresh(96 * MINUTE_MS + 1000, deltas_max=0)
    assert again["touched_turns"] == 2 and "9 times" in _evidence(staged, "h0")
    staged.assert_equal_to_live()


def test_a_key_charged_nowhere_recomputes_its_unbilled_turns_only_once_a_charge_arrives(
    staged: StagedStore, contract_turn: Any
) -> None:
    """A reused key whose calls are never charged (a platform sending no billing spans): each of its turns has
    an unbilled_side_effect that only a charge of the key could settle. New uncharged turns leave them be;
    the first charge settles them all, in a second round of the same refresh."""

    def unpaid(turn: str, minute: int, charged: bool = False) -> list[dict]:
        ids = {"turn": turn, "trace": f"t-{turn}", "session": f"s-{turn}"}
        return shifted(contract_turn(**ids, key="k-unpaid", charged=charged), minute * MINUTE_MS)

    staged.send([row for n in range(8) for row in unpaid(f"u{n}", n * 5)], at_ms=41 * MINUTE_MS)
    staged.refresh(41 * MINUTE_MS + 1000, deltas_max=0)
    assert all("unbilled_side_effect" in staged.kinds(f"u{n}") for n in range(8))

    staged.send(unpaid("more", 45), at_ms=46 * MINUTE_MS)
    more = staged.refresh(46 * MINUTE_MS + 1000, deltas_max=0)
    assert (more["touched_turns"], more["key_rounds"]) == (2, 1), "more, and u0 (the duplicate_commit)"
    staged.assert_equal_to_live()

    staged.send(unpaid("paid", 47, charged=True), at_ms=48 * MINUTE_MS)
    paid = staged.refresh(48 * MINUTE_MS + 1000, deltas_max=0)
    assert (paid["touched_turns"], paid["key_rounds"]) == (10, 2), "paid, then the nine turns it settles"
    assert not any("unbilled_side_effect" in staged.kinds(turn) for turn in ("u3", "more", "paid"))
    staged.assert_equal_to_live()


def test_a_turn_sharing_a_key_with_many_reads_their_kept_facts_and_whole_only_those_new_copies_touch(
    staged: StagedStore, builders: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Turn detail page (and an export) of a turn carrying a key many turns carry: it reads the facts the
    derived state keeps of the other turns (a delta's where one replaced a turn), not their spans, except the
    turns a copy received after the watermark touches, which it reads whole; and it answers as a read of
    every trace sharing the key does."""

    def hot(turn: str, minute: int) -> list[dict]:
        rows = builders.turn(turn=turn, trace=f"t-{turn}", session=f"s-{turn}", key="k-hot")
        return shifted(rows, minute * MINUTE_MS)

    def acknowledged(trace: str, turn: int) -> dict:
        """A third party's acknowledgement of h<turn>'s call again, in a trace of its own linked to the
        turn's tool span (it inherits the turn's identity)."""
        at = turn * 5 * MINUTE_MS + 2300
        ack = {c.TOOL_CALL_ID: "call1", c.IDEMPOTENCY_KEY: "k-hot", c.THIRD_PARTY_STATUS: "250 OK"}
        return builders.span(
            "POST webhook", at, at + 20, trace=trace, session=None, turn=None, layer="third_party",
            node="relay", links=[(f"t-h{turn}", "tool")],
            events=[builders.event(c.EV_THIRD_PARTY_ACK, at + 10, hlc_at=at + 10, **ack)],
        )

    staged.send([row for n in range(8) for row in hot(f"h{n}", n * 5)], at_ms=61 * MINUTE_MS)
    staged.refresh(61 * MINUTE_MS + 1000, deltas_max=0)
    names = sorted(turn_queries.load())
    named = ("t-early", "tp6", "tp7", *(f"t-h{n}" for n in range(8)))
    traces = {hashlib.md5(name.encode()).hexdigest(): name for name in named}  # the given rows' trace ids

    def page(con: duckdb.DuckDBPyConnection, turn: str) -> tuple[dict[str, Any], list[str], int]:
        """Every turn query of the turn, the traces it read, and the other turns' kept facts it counted."""
        answers = turn_queries.run_all(con, [f"s-{turn}"], [turn], names, lambda found: found.fetchall())
        [(held,)] = con.execute("select getvariable('turnlens_turn_traces')").fetchall()
        [(facts,)] = con.execute("select count(*) from turnlens_turn_key_facts").fetchall()
        return answers, sorted(traces[trace] for trace in held), facts

    with catalog.connect(staged.dir) as con:
        _, read, facts = page(con, "h3")
    assert (read, facts) == (["t-h3"], 7), "its own trace, and the seven other turns' facts"

    # h6 acknowledged again: a delta replaces its facts (its partition's file still holds the old ones)
    staged.send([acknowledged("tp6", 6)], at_ms=62 * MINUTE_MS)
    assert staged.refresh(62 * MINUTE_MS + 1000)["folded_partitions"] == []
    # past the watermark, no refresh yet: a turn whose acknowledgement came first (it takes h0's
    # duplicate_commit), a retried export of h5, and h7 acknowledged again
    staged.send(hot("early", -5) + hot("h5", 25) + [acknowledged("tp7", 7)], at_ms=63 * MINUTE_MS)
    plain = catalog.live_connection(staged.dir)
    try:
        live = {turn: page(plain, turn)[0] for turn in ("early", "h0", "h3", "h6", "h7")}
        for narrow_from in (identity_index.NARROW_FROM, 1):
            monkeypatch.setattr(identity_index, "NARROW_FROM", narrow_from)
            with catalog.connect(staged.dir) as con:
                _, read, facts = page(con, "h3")
                assert read == ["t-early", "t-h3", "t-h5", "t-h7", "tp7"], "the turns the new copies touch"
                assert facts == 5, "h0, h1, h2, h4, and h6's from the delta"
                pages = {turn: page(con, turn)[0] for turn in live}
            assert pages == live
        assert any("duplicate_commit" in row for row in live["early"]["findings"]), "acknowledged first"
        assert not any("duplicate_commit" in row for row in live["h0"]["findings"]), "no longer the first"
        assert any("11 times" in str(row) for row in live["early"]["findings"]), "every acknowledgement"
    finally:
        plain.close()


def _evidence(staged: StagedStore, turn: str) -> str:
    with catalog.connect(staged.dir) as con:
        [(evidence,)] = con.execute(
            "select evidence from divergences where turn_id = ? and kind = 'duplicate_commit'", [turn]
        ).fetchall()
    return str(evidence)


def test_a_refresh_reads_the_identity_of_only_the_partitions_its_turns_reach(
    staged: StagedStore, contract_turn: Any, span: Any
) -> None:
    # five turns ten minutes apart and a job of its own turn linking to a trace not received yet, folded into
    # six partitions' base files: turn 0 committed an invoice under k-shared without a charge
    turns = [
        shifted(
            contract_turn(
                turn=f"old{n}", trace=f"to{n}", session=f"s-o{n}", key="k-shared" if n == 0 else f"k-{n}",
                charged=n != 0,
            ),
            n * 10 * MINUTE_MS,
        )
        for n in range(5)
    ]
    waiting = span("background.job", 35 * MINUTE_MS, 35 * MINUTE_MS + 500, trace="waiting", session="s-w",
                   turn="jobturn", layer="runtime", links=[("tx", "http")])
    staged.send([row for turn in turns for row in turn] + [waiting], at_ms=41 * MINUTE_MS)
    staged.refresh(41 * MINUTE_MS + 1000, deltas_max=0)
    assert len(staged.partitions()) == 6 and "unbilled_side_effect" in staged.kinds("old0")

    # a new turn charging k-shared, a job naming no turn linking to turn 2's trace, the trace the waiting
    # job links to, and a late trace of turn 4: the index leads the refresh to the four older partitions
    # their rows reach (by key, by a trace a new link names, by a trace an old link names, by turn), and it
    # reads no other
    charge = shifted(contract_turn(turn="new", trace="tn", session="s-n", key="k-shared"), 50 * MINUTE_MS)
    parent = shifted(contract_turn(turn="x", trace="tx", session="s-x", key="k-x"), 50 * MINUTE_MS)
    late = [
        span("background.job", 51 * MINUTE_MS, 51 * MINUTE_MS + 500, trace="job", session=None, turn=None,
             layer="runtime", links=[("to2", "http")]),
        span("late.step", 52 * MINUTE_MS, 52 * MINUTE_MS + 500, trace="tlate", session="s-o4", turn="old4",
             layer="runtime"),
    ]
    staged.send(charge + parent + late, at_ms=53 * MINUTE_MS)
    refreshed = staged.refresh(53 * MINUTE_MS + 1000, deltas_max=0)
    assert refreshed["touched_turns"] == 6, "new, x, old0 (its key), old2 (linked), jobturn (linking), old4"
    assert refreshed["identity_partitions_read"] == 4, "old0's, old2's, jobturn's and old4's, of six"
    staged.assert_equal_to_live()
    assert "unbilled_side_effect" not in staged.kinds("old0")

    # a manifest without the index, and index chunks without their runs (as an older turnlens wrote them): the
    # refresh reads every partition and indexes them, finds the input segments from the chunks' files, and the
    # next one reads only what it reaches again
    current = staged.dir / "derived" / "current.json"
    body = json.loads(current.read_text())
    body.pop("identity")
    current.write_text(json.dumps(body))
    for run in (staged.dir / "derived" / "index").glob("traces-v*.npy"):
        run.unlink()
    staged.send(shifted(contract_turn(turn="a", trace="ta", session="s-a", key="k-a"), 54 * MINUTE_MS),
                at_ms=55 * MINUTE_MS)
    unindexed = staged.refresh(55 * MINUTE_MS + 1000, deltas_max=0)
    assert unindexed["identity_partitions_read"] == unindexed["partitions"] - 1, "all but the new one's"
    staged.send(shifted(contract_turn(turn="b", trace="tb", session="s-b", key="k-2"), 56 * MINUTE_MS),
                at_ms=57 * MINUTE_MS)
    indexed = staged.refresh(57 * MINUTE_MS + 1000, deltas_max=0)
    assert indexed["touched_turns"] == 2 and indexed["identity_partitions_read"] == 1, "turn 2's: k-2"
    staged.assert_equal_to_live()


def test_one_turns_lookups_read_only_the_partitions_holding_its_rows_and_answer_as_a_read_of_all(
    staged: StagedStore, contract_turn: Any, span: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # six turns ten minutes apart folded into their partitions' base files: old0 committed an invoice under
    # k-shared and old5 charged it (the key is matched across turns), and a job of its own turn eleven
    # minutes after old1 links to old1's trace (it inherits old1's identity)
    turns = six_turns(contract_turn, "old", "to", "s-o", sharing=(0, 5))
    job = span("background.job", 21 * MINUTE_MS, 21 * MINUTE_MS + 500, trace="job", session="s-j",
               turn="jobturn", layer="runtime", links=[("to1", "http")])
    staged.send([row for turn in turns for row in turn] + [job], at_ms=61 * MINUTE_MS)
    staged.refresh(61 * MINUTE_MS + 1000, deltas_max=0)
    partitions = staged.partitions()
    assert len(partitions) >= 6

    traces = [f"to{n}" for n in range(6)]  # the given rows' trace names (their ids: the names' MD5)
    hold, hold_keys = ((turn_queries.TURN_SQL / f"{name}.sql").read_text() for name in ("hold", "hold_keys"))
    names = sorted(turn_queries.load())
    monkeypatch.setattr(identity_index, "NARROW_FROM", 1)
    with catalog.connect(staged.dir) as con:

        def read(session: str, turn: str) -> tuple[set[str], list[str]]:
            """The partitions one turn's lookups read and the traces they hold."""
            with identity_index.narrowed(con) as narrowing:
                assert narrowing is not None
                narrowing.turn_traces(hold, {"sessions": [session], "turns": [turn]}, [turn])
                narrowing.key_traces(hold_keys)
                [(held,)] = con.execute("select getvariable('turnlens_turn_traces')").fetchall()
                by_id = {hashlib.md5(name.encode()).hexdigest(): name for name in ("job", *traces)}
                return narrowing.parts, sorted(by_id[trace] for trace in held)

        # old2 shares nothing: its own partition; old0 reaches old5's by its key, old1 the job's by its link
        old2_parts, old2_traces = read("s-o2", "old2")
        assert len(old2_parts) == 1 and old2_traces == ["to2"]
        old0_parts, old0_traces = read("s-o0", "old0")
        assert len(old0_parts) == 2 and old0_traces == ["to0", "to5"]
        old1_parts, old1_traces = read("s-o1", "old1")
        assert len(old1_parts) == 2 and old1_traces == ["job", "to1"]

        # every turn query of every turn answers as it does reading every partition
        def rows(found: duckdb.DuckDBPyConnection) -> list[tuple]:
            return found.fetchall()

        for session, turn in [(f"s-o{n}", f"old{n}") for n in range(6)] + [("s-j", "jobturn")]:
            narrowed = turn_queries.run_all(con, [session], [turn], names, rows)
            with monkeypatch.context() as whole:
                whole.setattr(identity_index, "NARROW_FROM", 10**9)
                everything = turn_queries.run_all(con, [session], [turn], names, rows)
            assert narrowed == everything, turn
        unbilled = turn_queries.run_all(con, ["s-o0"], ["old0"], ["findings"], rows)
        assert not any("unbilled_side_effect" in row for row in unbilled["findings"]), "old5's charge is seen"


def test_a_full_build_resolving_identity_a_chunk_of_traces_at_a_time_equals_the_live_views(
    staged: StagedStore, contract_turn: Any, span: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a store past identity_chunk_copies resolves each trace's turn a chunk at a time, a chunk being
    # the traces first seen in a group of segments. Each turn here is received in its own segment (a group of
    # its own), the jobs naming no turn last: each job inherits the identity of the trace it links to, which
    # its chunk must read from another group's segment; and a retried export of t1 lands in a later segment
    turns = [
        shifted(contract_turn(turn=f"t{n}", trace=f"tr{n}", session=f"s{n}", key=f"k{n}"), n * 10 * MINUTE_MS)
        for n in range(4)
    ]
    for n, turn in enumerate(turns):
        staged.send(turn, at_ms=(n * 10 + 5) * MINUTE_MS)
    jobs = [
        span("background.job", (n * 10 + 2) * MINUTE_MS, (n * 10 + 2) * MINUTE_MS + 500, trace=f"job{n}",
             session=None, turn=None, layer="runtime", links=[(f"tr{n}", "http")])
        for n in range(4)
    ]
    staged.send(jobs + turns[1], at_ms=41 * MINUTE_MS)
    for threads in ("", "_ONE_THREAD"):  # whatever the cores of the host running the suite
        monkeypatch.setattr(materialize, f"IDENTITY_CHUNK_COPIES{threads}", min(len(turn) for turn in turns))

    # the identity the chunks resolve is the one a single pass over the whole store resolves (the units then
    # recompute their turns from their own input, which hides a wrong identity in all but the buckets)
    identities: dict[str, list[tuple]] = {}
    in_chunks = materialize._identity_in_chunks

    def compared(run: Any, index: Any, present: list[str], *rest: Any) -> int:
        chunks = in_chunks(run, index, present, *rest)

        def read() -> list[list[tuple]]:
            tables = ("turns", "keys", "links")
            reads = [f"select * from turnlens_all_trace_{table} order by all" for table in tables]
            return [run.con.execute(read).fetchall() for read in reads]

        identities["chunks"] = read()
        run.step("whole_store_identity")
        run.step("whole_store_keys_links")
        identities["one_pass"] = read()
        return chunks

    monkeypatch.setattr(materialize, "_identity_in_chunks", compared)

    # and the units' inputs written a few units per pass over the store (here one): the same as all at once
    monkeypatch.setattr(materialize, "UNITS_PER_PASS", 1)
    built = staged.refresh(41 * MINUTE_MS + 1000, full=True, bucket_spans=20)
    assert built["mode"] == "full" and built["identity_chunks"] == 5 and built["units"] > 1
    _, keys, links = identities["chunks"]
    assert identities["chunks"] == identities["one_pass"]
    assert len(keys) == 4 and len(links) == 4, "each trace's keys and links found once, by its own chunk"
    staged.assert_equal_to_live()
    with catalog.connect(staged.dir) as con:
        spans = dict(con.execute("select turn_id, spans from turns").fetchall())
    assert all(spans[f"t{n}"] == len(turns[n]) + 1 for n in range(4)), "each job's span counted in its turn"
    assert not any(turn.startswith("job") or len(turn) == 32 for turn in spans), "no job is a turn of its own"


def test_each_pass_of_a_full_build_reads_only_the_segments_holding_its_units_traces(
    staged: StagedStore, contract_turn: Any, span: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # six turns ten minutes apart, each received in its own segment, as a collector writes them over time;
    # what a unit needs from other segments: a later turn charging an older one's key (t4 pays for t1's
    # invoice), a job received last that links to the oldest turn, and a retried copy of t2's spans
    turns = six_turns(contract_turn, "t", "tr", "s", sharing=(1, 4))
    for n, turn in enumerate(turns):
        staged.send(turn, at_ms=(n * 10 + 5) * MINUTE_MS)
    job = span("background.job", 62 * MINUTE_MS, 62 * MINUTE_MS + 500, trace="job", session=None, turn=None,
               layer="runtime", links=[("tr0", "http")])
    staged.send([job], at_ms=63 * MINUTE_MS)
    staged.send(turns[2], at_ms=64 * MINUTE_MS)

    monkeypatch.setattr(materialize, "UNITS_PER_PASS", 1)
    built = staged.refresh(65 * MINUTE_MS, full=True, bucket_spans=10)
    assert built["mode"] == "full" and built["units"] == 6
    assert (built["key_fact_turns"], built["key_fact_units"]) == (2, 1), "t1 and t4 share a key"
    staged.assert_equal_to_live()
    reads, segments_present = built["shuffle_segments_read"], built["segments"]
    assert len(reads) == 7 and max(reads) < segments_present, "no pass reads every segment"
    assert sum(reads[1:]) < 2 * segments_present, "the units' passes read the store about once between them"
    assert "unbilled_side_effect" not in staged.kinds("t1"), "t1's charge is read from t4's segment"
    with catalog.connect(staged.dir) as con:
        [(spans, traces)] = con.execute("select spans, traces from turns where turn_id = 't0'").fetchall()
    assert traces == 2 and spans == len(turns[0]) + 1, "the job's span is counted in the turn it links to"


def test_a_turn_updated_by_three_refreshes_reads_once_and_folds_into_its_partition(
    staged: StagedStore, contract_turn: Any
) -> None:
    steady = contract_turn(turn="steady", key="k-steady", trace="tsd", session="s-sd")
    growing = shifted(contract_turn(turn="growing", key="k-grow", trace="tg", session="s-g"), 5 * MINUTE_MS)
    layers = ("tool", "third_party", "billing")
    later = {layer: [row for row in growing if row["layer"] == layer] for layer in layers}
    first = [row for row in growing if row["layer"] not in later]
    staged.send(steady + first, at_ms=6 * MINUTE_MS)
    assert staged.refresh(6 * MINUTE_MS + 1000)["mode"] == "full"
    base = derived_manifest.current_snapshot(staged.dir)
    assert base is not None and len(base.partitions) == 2 and base.deltas == []

    # three refreshes, each with more of the growing turn: each writes a delta, no partition file is rewritten
    kinds = []
    for step, layer in enumerate(later, start=1):
        staged.send(later[layer], at_ms=6 * MINUTE_MS + step * 2000)
        refreshed = staged.refresh(6 * MINUTE_MS + step * 2000 + 1000)
        assert refreshed["mode"] == "refresh" and refreshed["touched_turns"] == 1
        assert refreshed["folded_partitions"] == [] and refreshed["deltas"] == step
        derived = staged.assert_equal_to_live()
        assert [turn for _, turn, *_ in derived["turns"]].count("growing") == 1, "one version of the turn"
        kinds.append(staged.kinds("growing"))
    assert "unbilled_side_effect" in kinds[0] and "unbilled_side_effect" not in kinds[-1], kinds
    piled = derived_manifest.current_snapshot(staged.dir)
    assert piled is not None and piled.partitions == base.partitions and len(piled.deltas) == 3
    with catalog.connect(staged.dir) as con:
        assert con.execute("select partitions from turnlens_snapshot").fetchall() == [(2,)]

    # the deltas pile past the limit: they are folded into the growing turn's partition, the other one is kept
    folded = staged.refresh(6 * MINUTE_MS + 9000, deltas_max=2)
    [growing_part] = {part for delta in piled.deltas for part in delta["parts"]}
    assert folded["folded_partitions"] == [growing_part] and folded["deltas"] == 0
    manifest = derived_manifest.current_snapshot(staged.dir)
    assert manifest is not None and manifest.deltas == []
    assert manifest.partitions[growing_part] == manifest.version
    assert {p: v for p, v in manifest.partitions.items() if p != growing_part} == {
        p: v for p, v in base.partitions.items() if p != growing_part
    }
    staged.assert_equal_to_live()
    assert staged.kinds("growing") == kinds[-1]
    # the deltas' files are handed to the deferred deletion, as a replaced partition file is
    pending = json.loads((staged.dir / "segments" / "_maintenance.json").read_text())["entries"]
    scheduled = {
        str((staged.dir / "segments" / name).resolve()) for entry in pending for name in entry["sources"]
    }
    deltas = {str(Path(name).resolve()) for name in piled.files() if "/delta/" in name}
    assert len(deltas) >= 3 and deltas <= scheduled


def test_a_partition_larger_than_a_bucket_is_built_in_slices_even_when_a_slice_holds_no_turn(
    staged: StagedStore, contract_turn: Any
) -> None:
    staged.send(contract_turn(turn="big", key="k-big", trace="tb", session="s-b"), at_ms=10_000)
    built = staged.refresh(20_000, bucket_spans=2)  # one turn, one partition, computed in several slices
    assert built["mode"] == "full" and built["buckets"] == 1 and built["units"] > 1
    assert {turn for _, turn, *_ in staged.assert_equal_to_live()["turns"]} == {"big"}


def _parquet_estimates(con: duckdb.DuckDBPyConnection, query: str) -> list[int]:
    """DuckDB's estimated rows of each Parquet read in the plan of `query`."""
    [(_, plan)] = con.execute(f"explain (format json) {query}").fetchall()
    found: list[int] = []

    def walk(node: dict) -> None:
        if node.get("name") == "READ_PARQUET":
            found.append(int(node["extra_info"]["Estimated Cardinality"]))
        for child in node.get("children", []):
            walk(child)

    for node in json.loads(plan):
        walk(node)
    return found


def test_the_derived_tables_are_estimated_at_their_rows_so_joins_build_on_the_small_side(
    staged: StagedStore, contract_turn: Any
) -> None:
    # DuckDB estimates a list of Parquet files at its first file's rows times their number. When the
    # zero-row file each list carries came first, every derived table was estimated at no rows, and each join
    # with one (the anti join with the replaced turns, the refresh's lookup of its traces) built its hash
    # table over the whole table: at 10M spans a refresh of 10,000 re-sent spans ran out of its 1 GB
    turns = [
        shifted(contract_turn(turn=f"t{i}", key=f"k{i}", trace=f"tr{i}", session=f"s{i}"), i * MINUTE_MS)
        for i in range(3)
    ]
    staged.send([row for turn in turns for row in turn], at_ms=4 * MINUTE_MS)
    staged.refresh(4 * MINUTE_MS + 1000)
    staged.send(turns[0], at_ms=4 * MINUTE_MS + 2000)  # a retried export: a delta replaces one turn
    staged.refresh(4 * MINUTE_MS + 3000)
    with catalog.connect(staged.dir) as con:
        for table in ("turns", "layer_verdicts", "turn_usage"):
            view = f"turnlens_current_{table}"
            estimates = _parquet_estimates(con, f"select * from {view}")
            assert estimates and min(estimates) > 0, f"{view}: {estimates}"


def test_store_wide_sums_read_the_rollups_of_settled_partitions_not_their_turns(
    staged: StagedStore, contract_turn: Any
) -> None:
    """node_skew, tool_audit and the Overview's counts add up each settled partition's rollup: with that
    partition's per-turn files gone they answer as before, while the partition a delta touches is summed from
    its rows in force."""
    early = contract_turn(turn="early", key="k-early", trace="te", session="s-early", cancel_at=1000)
    late_turn = shifted(contract_turn(turn="late", key="k-late", trace="tl", session="s-late"), 5 * MINUTE_MS)
    tool_spans = [row for row in late_turn if row["layer"] == "tool"]
    staged.send(early + [row for row in late_turn if row not in tool_spans], at_ms=5 * MINUTE_MS + 4000)
    staged.refresh(5 * MINUTE_MS + 5000)
    staged.send(tool_spans, at_ms=5 * MINUTE_MS + 8000)  # a delta for the late turn's partition
    assert staged.refresh(5 * MINUTE_MS + 9000)["mode"] == "refresh"
    derived = staged.assert_equal_to_live()
    assert derived["node_skew"], "skews to sum"
    assert any(calls > 0 for *_, calls in (row[:13] for row in derived["tool_audit"])), "calls to sum"
    assert derived["turn_minutes"] and derived["finding_minutes"], "turns and findings to count"

    manifest = derived_manifest.current_snapshot(staged.dir)
    assert manifest is not None
    [settled] = set(manifest.partitions) - manifest.unsettled_parts()
    summed = ("turn_node_skew", "tool_claims", "side_effects", "divergences", "turns", "cancel_acks")
    hidden = [Path(manifest.partition_file(table, settled)) for table in summed]
    for path in hidden:
        path.rename(path.with_suffix(".hidden"))
    try:
        with catalog.connect(staged.dir) as con:
            for view in ("node_skew", "tool_audit", "turn_minutes", "finding_minutes"):
                assert con.execute(f"select * from {view} order by all").fetchall() == derived[view]
            with pytest.raises(duckdb.IOException):  # the per-turn rows themselves are gone
                con.execute("select count(*) from turn_node_skew").fetchall()
    finally:
        for path in hidden:
            path.with_suffix(".hidden").rename(path)


def test_the_days_first_untiered_call_moves_to_an_earlier_one_that_arrives_late(
    staged: StagedStore, contract_turn: Any
) -> None:
    """untiered_tool is found among each partition's first untiered call of the day (a rollup) and the calls
    of the partitions deltas touch: an earlier call arriving late takes the finding from a settled
    partition's, before and after its delta is folded."""
    later = contract_turn(turn="later", key="k-later", trace="tb", session="s-b", tier=None)
    later = shifted(later, 7 * MINUTE_MS)
    earlier = contract_turn(turn="earlier", key="k-earlier", trace="ta", session="s-a", tier=None)
    staged.send(later, at_ms=8 * MINUTE_MS)
    staged.refresh(8 * MINUTE_MS + 1000)
    assert staged.kinds("later") == ["untiered_tool"]

    staged.send(earlier, at_ms=9 * MINUTE_MS)
    assert staged.refresh(9 * MINUTE_MS + 1000)["mode"] == "refresh"
    staged.assert_equal_to_live()
    assert staged.kinds("earlier") == ["untiered_tool"] and staged.kinds("later") == []

    staged.send(earlier, at_ms=10 * MINUTE_MS)  # a retried export, then a fold of every delta
    staged.refresh(10 * MINUTE_MS + 1000, deltas_max=0)
    manifest = derived_manifest.current_snapshot(staged.dir)
    assert manifest is not None and manifest.deltas == [], "folded: every partition is read from its rollup"
    staged.assert_equal_to_live()
    assert staged.kinds("earlier") == ["untiered_tool"] and staged.kinds("later") == []


def test_of_two_first_untiered_calls_at_one_moment_the_finding_names_one_call_whole(
    staged: StagedStore, contract_turn: Any
) -> None:
    """Two turns call the same untiered tool at the same HLC: the day's one finding names one of the calls,
    its session, turn and key together, the same one whichever arrived first (the least by session)."""
    second = contract_turn(turn="t-second", key="k-second", trace="tb", session="s-b", tier=None)
    first = contract_turn(turn="t-first", key="k-first", trace="ta", session="s-a", tier=None)
    staged.send(second, at_ms=8 * MINUTE_MS)
    staged.send(first, at_ms=8 * MINUTE_MS + 10)
    staged.refresh(8 * MINUTE_MS + 1000)
    staged.assert_equal_to_live()
    assert untiered_findings(staged) == [("s-a", "t-first", "k-first")]


def test_the_days_first_untiered_call_without_a_key_is_named_without_one(
    staged: StagedStore, contract_turn: Any
) -> None:
    """The first call carries no idempotency key and a later one does, in another partition: the finding names
    the first call whole, its missing key too, live and derived alike (not the later call's key)."""
    first = contract_turn(turn="t-first", key=None, trace="ta", session="s-a", tier=None)
    later = contract_turn(turn="t-later", key="k-later", trace="tb", session="s-b", tier=None)
    later = shifted(later, 7 * MINUTE_MS)
    staged.send(first + later, at_ms=8 * MINUTE_MS)
    staged.refresh(8 * MINUTE_MS + 1000)
    staged.assert_equal_to_live()
    assert untiered_findings(staged) == [("s-a", "t-first", None)]


def untiered_findings(staged: StagedStore) -> list[tuple]:
    """The session, turn and key each untiered_tool finding names."""
    with catalog.connect(staged.dir) as con:
        return con.execute(
            "select session_id, turn_id, idempotency_key from divergences where kind = 'untiered_tool'"
        ).fetchall()


def test_the_overviews_counts_over_any_window_equal_a_count_of_the_rows_in_it(
    staged: StagedStore, contract_turn: Any
) -> None:
    """The Overview adds up per-minute rollups for the minutes wholly inside its window and counts the rows of
    the minutes the window cuts: over windows that cut minutes, lie inside one, end on a minute or are open,
    its turns, cancels and findings per bucket are those of a plain count of the rows in the window."""
    from turnlens.dashboard import data

    starts = [0, 20_000, 40_000, 70_000, 10 * MINUTE_MS + 5000, 25 * MINUTE_MS]  # ms after T0
    for n, at in enumerate(starts):
        turn = contract_turn(
            turn=f"w{n}", key=None if n % 3 == 0 else f"k-w{n}", trace=f"tw{n}", session=f"s-w{n}",
            cancel_at=1000 if n % 2 else None, charged=n != 4,
        )
        staged.send(shifted(turn, at), at_ms=at + 5000)
    staged.refresh(12 * MINUTE_MS)  # the first five settled in their partitions
    staged.refresh(26 * MINUTE_MS)  # the last one through a delta
    manifest = derived_manifest.current_snapshot(staged.dir)
    assert manifest is not None and manifest.deltas and set(manifest.partitions) - manifest.unsettled_parts()
    staged.assert_equal_to_live()

    t0 = T0_MS
    windows = [
        (None, None),
        (t0 + 1, None),  # cuts the first minute: the turn at T0 is out, the ones 20 and 40 s later in
        (None, t0 + 30_000),  # cuts it at the other end
        (t0 + 25_000, t0 + 45_000),  # inside one minute (T0 is 40 s into its minute)
        (t0 + 30_000, t0 + 10 * MINUTE_MS + 5000),  # cuts two minutes, ends on a turn's start
        (t0 - t0 % MINUTE_MS, t0 - t0 % MINUTE_MS + 2 * MINUTE_MS),  # on minute boundaries
        (t0 + 20_000, t0 + 20_000),  # one instant
    ]
    with catalog.connect(staged.dir) as con:
        for from_ms, to_ms in windows:
            window = {"from_ms": from_ms, "to_ms": to_ms}
            low, high = (-1 if from_ms is None else from_ms), (2**42 if to_ms is None else to_ms)
            expected = con.execute(
                "select count(*), count(c.turn_id) from turns as t left join cancel_acks as c "
                "using (session_id, turn_id) where t.started_wall_ns between ? * 1000000 and ? * 1000000",
                [low, high],
            ).fetchall()
            counts = data.run_named(con.cursor(), "overview_counts", window)
            assert [tuple(counts.iloc[0])] == expected, window
            for bucket_ms in (15_000, MINUTE_MS, 2 * MINUTE_MS):
                expected_findings = con.execute(
                    "select make_timestamp(((detected_hlc >> 16) // $b * $b) * 1000) as bucket, kind, "
                    "count(*) from divergences where detected_hlc >> 16 between $low and $high "
                    "group by all order by all",
                    {"b": bucket_ms, "low": low, "high": high},
                ).fetchall()
                found = data.run_named(con.cursor(), "findings_by_kind", window | {"bucket_ms": bucket_ms})
                rows = [tuple(row) for row in found.itertuples(index=False)]
                assert rows == expected_findings, (window, bucket_ms)
        assert con.execute("select sum(turns), sum(cancelled) from turn_minutes").fetchone() == (6, 3)
