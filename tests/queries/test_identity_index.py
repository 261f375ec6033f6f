"""The identity index names exactly the partitions whose current files hold a value, however often partitions
are written again, moved or dropped and its runs merged: given identity rows per partition, every lookup
equals a scan of the partitions' current files."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np
from turnlens.queries import identity_index
from turnlens.queries.manifest import Manifest

TABLES = {
    "trace_turns": ("trace_id", "turn_id"),
    "trace_keys": ("trace_id", "idempotency_key"),
    "trace_links": ("trace_id", "linked_trace_id"),
}


def write_partition(con: duckdb.DuckDBPyConnection, manifest: Manifest, part: str, traces: list[int]) -> None:
    """A partition's identity files at the manifest's version: trace t is in turn t // 3, carries key t % 7
    and links to trace t + 1000."""
    for table, columns in TABLES.items():
        rows = {
            "trace_turns": [(f"t{t}", f"turn{t // 3}") for t in traces],
            "trace_keys": [(f"t{t}", f"k{t % 7}") for t in traces],
            "trace_links": [(f"t{t}", f"t{t + 1000}") for t in traces if t % 2],
        }[table]
        target = manifest.partition_file(table, part, manifest.version)
        target.parent.mkdir(parents=True, exist_ok=True)
        values = ", ".join(f"('{a}', '{b}')" for a, b in rows) or "(null::varchar, null::varchar)"
        named = f"(values {values}) as v({', '.join(columns)})"
        con.execute(f"copy (select * from {named} where {columns[0]} is not null) to '{target}'")


def scanned(con: duckdb.DuckDBPyConnection, manifest: Manifest, kind: str) -> dict[str, set[str]]:
    """Each value of a kind with the partitions whose current files hold it, read from the files."""
    _, table, column = next(k for k in identity_index.KINDS if k[0] == kind)
    found: dict[str, set[str]] = {}
    for part in manifest.partitions:
        for (value,) in con.execute(
            f"select {column} from '{manifest.partition_file(table, part)}'"
        ).fetchall():
            found.setdefault(value, set()).add(part)
    return found


def test_lookups_equal_a_scan_of_the_current_files_through_rewrites_moves_drops_and_merges(
    tmp_path: Path,
) -> None:
    con = duckdb.connect()
    rng = random.Random(7)
    manifest = Manifest(
        folder=tmp_path / "derived",
        version=1,
        inputs_sha256="",
        watermark=0,
        built_unix=0.0,
        partitions={},
        chunks=[],
        template=1,
    )
    holding: dict[str, list[int]] = {}
    for step in range(3 * identity_index.RUNS_MAX):
        manifest = replace(manifest, version=step + 1)
        partitions = dict(manifest.partitions)
        # a new partition, a partition written again with traces moved into it from another, now and then
        # one dropped
        new = f"p{step:02d}"
        holding[new] = rng.sample(range(600), 20)
        if step >= 2:
            source, target = rng.sample(sorted(holding), 2)
            moved = holding[source][:5]
            holding[source] = holding[source][5:]
            holding[target] = holding[target] + moved
            for part in (source, target):
                write_partition(con, manifest, part, holding[part])
                partitions[part] = manifest.version
        if step % 5 == 4:
            gone = rng.choice(sorted(set(holding) - {new}))
            del holding[gone]
            partitions.pop(gone, None)
        write_partition(con, manifest, new, holding[new])
        partitions[new] = manifest.version
        manifest = replace(manifest, partitions=partitions)
        assert new in identity_index.uncovered(manifest)
        manifest, _ = identity_index.cover(con, manifest)
        assert identity_index.whole(manifest)
        assert len(manifest.identity) <= identity_index.RUNS_MAX

        probes = {
            "trace": [f"t{t}" for t in rng.sample(range(600), 8)],
            "turn": [f"turn{t}" for t in rng.sample(range(200), 8)],
            "key": [f"k{k}" for k in range(7)],
            "linked": [f"t{t + 1000}" for t in rng.sample(range(600), 8)],
        }
        for kind, values in probes.items():
            expected = scanned(con, manifest, kind)
            for value in values:
                hashed = identity_index.hashes(con, f"select '{value}'")
                found = identity_index.lookup(manifest, {kind: hashed})
                assert found == expected.get(value, set()), (step, kind, value)
    merged = [run for run in manifest.identity if len(run["parts"]) > 1]
    assert merged, "runs were merged along the way"
    assert identity_index.lookup(manifest, {"trace": np.array([], dtype=np.uint64)}) == set()
