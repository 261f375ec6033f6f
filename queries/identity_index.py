"""Which partitions hold the identity rows of given traces, turns, keys and links, without reading them.

A refresh recomputes the turns new copies touch, and finding them means looking identities up across the
whole store: the previous turn of each fresh trace, the traces sharing one of its idempotency keys, the traces
linking to it, the other traces of its turn (derived/fresh.sql's touched phase). Read from the partitions'
identity files, each of those lookups is a scan of every partition's, and the refresh's cost grows with the
store. This index answers them by partition instead: for each partition, the 64-bit hashes of the values its
identity rows carry, in runs of sorted arrays (`index/identity-v<N>.npy`, memory-mapped: a lookup of k values
reads about k log n of them, not the run). The refresh then reads the identity files of the few partitions
named (queries/materialize.py, `_touched`).

A run covers some partitions, each at the version of its files; a hit counts only where that version is the
partition's current one (a partition written again is covered by a newer run, and the old run's entries for it
are stale). The index is whole when every partition of the manifest is covered at its version; a refresh of
a manifest whose index is not whole reads every partition, and its publish covers them. A hash names a
partition that may hold the value: a collision can only add a partition to read, never leave one out.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from turnlens.collector import segments
from turnlens.queries import sqlfiles
from turnlens.queries.manifest import IDENTITY, Manifest, lookup_files, read_manifest, sql_list

# what a run maps to partitions: (kind, identity table, column)
KINDS = (
    ("trace", "trace_turns", "trace_id"),  # a trace's keys and links are in the partitions of its turns
    ("turn", "trace_turns", "turn_id"),
    ("key", "trace_keys", "idempotency_key"),
    ("linked", "trace_links", "linked_trace_id"),
)
RUNS_MAX = 12  # more runs than this are merged: the small ones into one, or all when they outgrow the largest
HASH = "md5_number_lower"  # a hash whose values do not change with DuckDB's version


def uncovered(manifest: Manifest) -> list[str]:
    """The partitions no run covers at their current version."""
    covered: set[tuple[str, int]] = set()
    for run in manifest.identity:
        covered |= {(part, int(version)) for part, version in run["parts"].items()}
    return sorted(part for part, version in manifest.partitions.items() if (part, version) not in covered)


def whole(manifest: Manifest) -> bool:
    return not uncovered(manifest)


def cover(con: duckdb.DuckDBPyConnection, manifest: Manifest) -> tuple[Manifest, list[Path]]:
    """The manifest with a run covering its uncovered partitions (and its runs merged when too many), and the
    files written for it, fsynced. Runs of partitions the manifest no longer names are dropped."""
    parts = uncovered(manifest)
    runs = [
        run
        for run in manifest.identity
        if any(manifest.partitions.get(part) == version for part, version in run["parts"].items())
    ]
    written: list[Path] = []
    if parts:
        target = manifest.identity_file(manifest.version)
        _save(target, _run_arrays(con, manifest, parts))
        written.append(target)
        runs = [run for run in runs if int(run["version"]) != manifest.version]
        runs.append(
            {"version": manifest.version, "parts": {part: manifest.partitions[part] for part in parts}}
        )
    if len(runs) > RUNS_MAX:
        runs, merged = _merge(manifest, runs)
        written.append(merged)
    return replace(manifest, identity=runs), written


def _run_arrays(con: duckdb.DuckDBPyConnection, manifest: Manifest, parts: list[str]) -> list[np.ndarray]:
    """For each kind, its entries for the partitions' rows, numbered by the partition (its position in
    `parts`) holding each."""
    arrays = []
    for _, table, column in KINDS:
        files = [str(manifest.partition_file(table, part)) for part in parts]
        arrays.append(_entries(con, files, column, "filename", files))
    return arrays


def _entries(
    con: duckdb.DuckDBPyConnection, read: list[str], column: str, by: str, names: list[str]
) -> np.ndarray:
    """A run's 2 x n array for one kind: the sorted distinct hashes of `column` in the rows of the files
    `read`, each with the position in `names` of the row's `by` column (`filename`: the file it was read
    from)."""
    fetched = con.execute(
        f"select distinct {HASH}(r.{column}) as h, n.p"
        f" from read_parquet({sql_list(read)}, hive_partitioning = false, filename = true,"
        " union_by_name = true) as r"
        f" join (select unnest($names) as {by}, generate_subscripts($names, 1) - 1 as p) as n using ({by})"
        f" where r.{column} is not null order by h, p",
        {"names": names},
    ).fetchnumpy()
    return np.stack([np.ma.getdata(fetched[name]).astype(np.uint64) for name in ("h", "p")])


def _save(target: Path, arrays: list[np.ndarray]) -> None:
    """One run's arrays in one file: a 2 x n array of every kind's columns side by side, and a first column
    giving each kind's length (so a kind is a slice of the memory-mapped file)."""
    lengths = np.array([[len(arrays), 0], *[[array.shape[1], 0] for array in arrays]], dtype=np.uint64).T
    body = np.concatenate([lengths, *arrays], axis=1) if arrays else lengths
    segments.ensure_dir(target.parent)
    tmp = target.with_name(f".{target.name}.tmp")
    with open(tmp, "wb") as out:
        np.save(out, body)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, target)


def _load(path: Path) -> list[np.ndarray]:
    """A run's arrays, memory-mapped: for each kind its 2 x n slice."""
    body = np.load(path, mmap_mode="r")
    kinds = int(body[0, 0])
    lengths = [int(n) for n in body[0, 1 : 1 + kinds]]
    arrays, start = [], 1 + kinds
    for length in lengths:
        arrays.append(body[:, start : start + length])
        start += length
    return arrays


def _merge(manifest: Manifest, runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Path]:
    """Merges runs into one of this version, keeping only their current entries: all of them when the others
    together outgrow the largest, else all but the largest (left as it is, so a merge rarely rewrites it)."""
    sizes = [os.stat(manifest.identity_file(int(run["version"]))).st_size for run in runs]
    largest = sizes.index(max(sizes))
    small = (sum(sizes) - sizes[largest]) * 2 <= sizes[largest]
    # the merged run is this version's: a largest run of this version is rewritten with the others
    left_alone = {largest} if small and int(runs[largest]["version"]) != manifest.version else set()
    chosen = [i for i in range(len(runs)) if i not in left_alone]
    position: dict[str, int] = {}
    per_kind: list[list[np.ndarray]] = [[] for _ in KINDS]
    for i in chosen:
        run = runs[i]
        current = np.array([_current(manifest, run, part) for part in run["parts"]] + [False], dtype=bool)
        remap = np.array(
            [
                position.setdefault(part, len(position)) if current[n] else 0
                for n, part in enumerate(run["parts"])
            ]
            + [0],
            dtype=np.uint64,
        )
        for kind, array in enumerate(_load(manifest.identity_file(int(run["version"])))):
            numbers = array[1].astype(np.int64)
            keep = current[numbers]
            per_kind[kind].append(np.stack([array[0][keep], remap[numbers[keep]]]))
    merged = []
    for arrays in per_kind:
        joined = np.concatenate(arrays, axis=1)
        joined = joined[:, np.lexsort((joined[1], joined[0]))]
        first = np.ones(joined.shape[1], dtype=bool)  # each (hash, partition) once
        first[1:] = (joined[0, 1:] != joined[0, :-1]) | (joined[1, 1:] != joined[1, :-1])
        merged.append(joined[:, first])
    target = manifest.identity_file(manifest.version)
    _save(target, merged)
    kept = [run for i, run in enumerate(runs) if i not in chosen]
    return [
        *kept,
        {"version": manifest.version, "parts": {part: manifest.partitions[part] for part in position}},
    ], target


def _current(manifest: Manifest, run: Mapping[str, Any], part: str) -> bool:
    """Whether the run covers the partition at its current version (else its entries for it are stale)."""
    return part in manifest.partitions and manifest.partitions[part] == run["parts"][part]


def hashes(con: duckdb.DuckDBPyConnection, query: str) -> np.ndarray:
    """The sorted distinct hashes of the one column `query` returns (non-null values)."""
    fetched = con.execute(
        f"select distinct {HASH}(v) as h from ({query}) as q(v) where v is not null"
    ).fetchnumpy()
    return np.unique(np.ma.getdata(fetched["h"]).astype(np.uint64))


def lookup(manifest: Manifest, probes: Mapping[str, np.ndarray]) -> set[str]:
    """The partitions whose identity rows may carry a probed value ({kind: sorted uint64 hashes})."""
    kinds = [kind for kind, _, _ in KINDS]
    found: set[str] = set()
    for run in manifest.identity:
        run_parts = list(run["parts"])
        current = np.array([_current(manifest, run, part) for part in run_parts] + [False], dtype=bool)
        if not current.any():
            continue
        arrays = _load(manifest.identity_file(int(run["version"])))
        for kind, wanted in probes.items():
            found |= {run_parts[n] for n in _numbers(arrays[kinds.index(kind)], wanted) if current[n]}
    return found


def _numbers(array: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The distinct numbers (second row) of a run's entries whose hash (first row) is wanted."""
    if not len(wanted) or not array.shape[1]:
        return np.zeros(0, dtype=np.int64)
    starts = np.searchsorted(array[0], wanted, "left")
    counts = np.searchsorted(array[0], wanted, "right") - starts
    hit = counts > 0
    starts, counts = starts[hit], counts[hit]
    # every entry of every hit: the start of its hit plus its rank within it
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.unique(np.asarray(array[1][np.repeat(starts, counts) + offsets]).astype(np.int64))


# The trace -> segment index (queries/materialize.py) keeps, beside each chunk's Parquet file (sorted by
# trace, for a reader's one-turn lookups), a run of the same kind: the hash of each trace id and the position
# of its segment among the chunk's segments (sorted by name). A refresh finds the segments of a few thousand
# input traces there instead of scanning every chunk.


def write_chunk_run(
    con: duckdb.DuckDBPyConnection, traces_file: Path, files: list[str], target: Path
) -> None:
    """The run of one chunk of the trace -> segment index: `traces_file` its (trace_id, file) rows, `files`
    its segments sorted by name."""
    _save(target, [_entries(con, [str(traces_file)], "trace_id", "file", files)])


def chunk_files_of(run_file: Path, files: list[str], traces: np.ndarray) -> set[str]:
    """The segments one chunk's run names for the traces (sorted hashes); `files` as it was written with."""
    [array] = _load(run_file)
    return {files[n] for n in _numbers(array, traces)}


def restricted(manifest: Manifest, parts: Iterable[str] | None) -> Manifest:
    """The manifest naming only these base partitions (all of them when None); its deltas stay."""
    if parts is None:
        return manifest
    wanted = set(parts)
    return replace(manifest, partitions={p: v for p, v in manifest.partitions.items() if p in wanted})


# One turn's lookups on a reader's connection (snapshot.sql's turn_traces_of and key_traces_of, which
# turn_queries.hold runs) read the identity files of every partition unless a session variable names fewer: a
# store keeping 30 days of hour partitions has 720 of each table. `narrowed` names the few the index says can
# hold the rows a lookup joins, as a refresh's touched phase does (queries/materialize.py, `_touched`).
LOOKUP_VARIABLE = "turnlens_lookup_{table}"
# partitions a manifest names before a lookup narrows its reads: below, reading them all costs less
NARROW_FROM = 8


@contextmanager
def narrowed(con: duckdb.DuckDBPyConnection) -> Iterator[Narrowing | None]:
    """A Narrowing of `con`'s one-turn lookups, or None where they read every partition: a connection to no
    store's catalogue, a catalogue of no derived state or of another version than the manifest's (a new one
    was published since the catalogue was opened), an index that is not whole, few partitions. The variables
    are cleared when the block ends, so the connection's later lookups read every partition again."""
    manifest = _catalogue_manifest(con)
    if manifest is None or len(manifest.partitions) < NARROW_FROM or not whole(manifest):
        yield None
        return
    narrowing = Narrowing(con, manifest)
    try:
        yield narrowing
    finally:
        for table in IDENTITY:
            con.execute(f"reset variable {LOOKUP_VARIABLE.format(table=table)}")


def _catalogue_manifest(con: duckdb.DuckDBPyConnection) -> Manifest | None:
    """The manifest whose files `con`'s catalogue reads, if it is still the store's current one."""
    try:
        [(path,)] = con.execute(
            "select path from duckdb_databases() where database_name = current_database()"
        ).fetchall()
        [(generation,)] = con.execute("select generation from turnlens_snapshot").fetchall()
    except (duckdb.Error, ValueError):
        return None
    if not path or generation is None:
        return None
    manifest = read_manifest(Path(path).parent)
    return manifest if manifest is not None and manifest.generation == generation else None


@dataclass
class Narrowing:
    """Runs a hold step of queries/turn/ over the identity files of only the partitions the index names for
    what it joins on, reading more until the index names no other: then each join of the lookup has seen every
    row of the store it matches, and the step's result is what a read of every partition gives."""

    con: duckdb.DuckDBPyConnection
    manifest: Manifest
    parts: set[str] = field(default_factory=set)

    def turn_traces(self, script: str, params: Mapping[str, Any], turns: list[str]) -> None:
        """Runs `script` (turn_traces_of(turns) into turnlens_turn_traces). It joins trace_turns on the turn
        ids, and trace_links on the traces it found (the trace linked to: a turn id is also the trace id of a
        trace naming no turn) and on the traces linking (whose links are in the partitions of their turns)."""
        ids = value_hashes(turns)
        self._run(
            script,
            params,
            {"turn": ids, "linked": ids, "trace": ids},
            lambda found: {"linked": value_hashes(turns + found), "trace": value_hashes(found)},
        )

    def key_traces(self, script: str) -> None:
        """Runs `script` (hold_kept_keys.sql: the kept facts of the turns sharing the held traces' keys, and
        the traces of the turns it reads whole, turnlens_turn_key_turn_ids, into turnlens_turn_traces; or
        hold_keys.sql, every trace sharing the keys). It joins trace_keys on the held traces (their keys are
        in the partitions of their turns) and on their keys, and trace_turns and trace_links as turn_traces
        does on the turns it reads whole and the traces it adds."""
        [(held,)] = self.con.execute("select getvariable('turnlens_turn_traces')").fetchall()
        self._run(
            script,
            {},
            {"trace": value_hashes(held)},
            lambda found: {
                "trace": value_hashes(found),
                "key": value_hashes(self._keys(held)),
                "turn": value_hashes(read := self._read_turns()),
                "linked": value_hashes(read + found),
            },
            held,
        )

    def _run(
        self,
        script: str,
        params: Mapping[str, Any],
        first: Mapping[str, np.ndarray],
        probes: Callable[[list[str]], Mapping[str, np.ndarray]],
        held: list[str] | None = None,
    ) -> None:
        """Runs `script` (which reads `held` from turnlens_turn_traces, if given, and sets it) until the index
        names no partition beyond those read for what it found (`probes`)."""
        needed = lookup(self.manifest, first)
        while True:
            self.parts |= needed
            self._read(self.parts)
            sqlfiles.execute_script(self.con, script, params)
            [(found,)] = self.con.execute("select getvariable('turnlens_turn_traces')").fetchall()
            needed = lookup(self.manifest, probes(list(found or [])))
            if needed <= self.parts:
                return
            if held is not None:  # the next run reads the step's input again, not what this one set
                self.con.execute("set variable turnlens_turn_traces = $held::varchar[]", {"held": held})

    def _read(self, parts: set[str]) -> None:
        """Points the lookups at these partitions' identity files and every delta's."""
        narrow = restricted(self.manifest, parts)
        for table in IDENTITY:  # the variable's name is ours; the files are bound
            self.con.execute(
                f"set variable {LOOKUP_VARIABLE.format(table=table)} = $files::varchar[]",
                {"files": lookup_files(narrow, table)},
            )

    def _read_turns(self) -> list[str]:
        """The turns hold_kept_keys.sql reads whole (none where hold.sql reset them: hold_keys.sql)."""
        [(turns,)] = self.con.execute("select getvariable('turnlens_turn_key_turn_ids')").fetchall()
        return list(turns or [])

    def _keys(self, traces: list[str]) -> list[str]:
        [(keys,)] = self.con.execute(
            "select idempotency_keys_of($traces::varchar[])", {"traces": traces}
        ).fetchall()
        return list(keys)


def value_hashes(values: Iterable[str]) -> np.ndarray:
    """The sorted distinct hashes of these strings, as HASH gives them (the lower 64 bits of their MD5, read
    as a little-endian number), computed here: a lookup of a few values needs no query."""
    return np.unique(
        np.array(
            [int.from_bytes(hashlib.md5(v.encode()).digest()[8:], "little") for v in values], dtype=np.uint64
        )
    )
