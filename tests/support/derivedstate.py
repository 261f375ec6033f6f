"""What a store's derived state holds, read from the files its manifest names: what tests compare of two
builds of the same store (on two engines, or a build finished by a later run and one that never stopped)."""

from __future__ import annotations

from pathlib import Path

import duckdb
from storebuilder import rounded
from turnlens.queries import manifest as derived_manifest


def derived_tables(store: Path) -> dict[str, list[tuple]]:
    """Every row of every derived table (the eight views and the three identity tables), from the files the
    current manifest names, with the partitions it names."""
    manifest = derived_manifest.current_snapshot(store)
    assert manifest is not None and manifest.complete
    con = duckdb.connect()
    tables = {
        table: [
            rounded(row)
            for row in con.execute(
                f"select * from read_parquet({derived_manifest.sql_list(manifest.table_files(table))})"
                " order by all"
            ).fetchall()
        ]
        for table in derived_manifest.TABLES
    }
    con.close()
    return tables | {"partitions": sorted(manifest.partitions)}  # type: ignore[dict-item]


def leftovers(store: Path) -> list[str]:
    """What a materialiser's run leaves only while it runs: the units' input files of a full build, DuckDB's
    spill files, temporary files, a full build's first pass. Empty once a run has finished the state."""
    derived = store / derived_manifest.DERIVED_DIR
    found = [*derived.glob(".shuffle-v*"), *derived.glob(".build-v*"), *derived.glob("**/*.tmp")]
    found += [path for path in derived.glob(".spill/**/*") if path.is_file()]
    found += list(derived.glob("*/*/.v*.slice-*.parquet"))
    return sorted(str(path.relative_to(derived)) for path in found)
