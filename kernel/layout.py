"""Where things are in a store directory. Every part that opens a store finds its files from here.

    DIR/
      segments/date=YYYY-MM-DD/*.parquet   spans, one row per stored copy (the collector writes them)
      turnlens.duckdb                       the catalog: views over the segments (queries writes it)
      derived/                              the materialised per-turn state (queries writes it)
      alerts/                               alert state and history (alerts writes them)
      quarantine/date=YYYY-MM-DD/*.parquet  segments moved aside as unreadable (collector/quarantine.py),
                                            listed in segments/_quarantine.jsonl
"""

from __future__ import annotations

from pathlib import Path

SEGMENTS_DIR = "segments"
PARTITION_PREFIX = "date="
SEGMENT_SUFFIX = ".parquet"
CATALOG_FILE = "turnlens.duckdb"
DERIVED_DIR = "derived"
ALERTS_DIR = "alerts"
QUARANTINE_DIR = "quarantine"
QUARANTINE_LOG = "_quarantine.jsonl"  # in segments/, where the views and the dashboard may read


# characters DuckDB reads as wildcards in every file path it is given (a list of files is globbed too)
GLOB_CHARACTERS = "[*?"


class StorePathError(ValueError):
    """A folder that cannot hold a store: DuckDB would read its path as a pattern."""


def check_store_path(store_dir: Path) -> Path:
    """The store's folder as an absolute path; StorePathError when the path holds a glob character: DuckDB
    treats `[...]` as a class of characters (a store in `run[1]/` matched no file of its own) and `*`, `?`
    as wildcards (a store in `team?/` would read `teamb/`'s segments too)."""
    resolved = Path(store_dir).expanduser().resolve()
    found = sorted({char for char in str(resolved) if char in GLOB_CHARACTERS})
    if found:
        raise StorePathError(
            f"{resolved} cannot hold a store: its path has {' '.join(found)}, which DuckDB reads as a pattern"
            " in every file path. Choose a folder whose path has no [, * or ?."
        )
    return resolved


def segments_glob(store_dir: Path) -> str:
    """Absolute glob over every segment file of the store; temporary files never match it."""
    return str(check_store_path(store_dir) / SEGMENTS_DIR / "*" / f"*{SEGMENT_SUFFIX}")
