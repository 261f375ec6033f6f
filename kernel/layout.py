"""Where things are in a store directory. Every part that opens a store finds its files from here.

    DIR/
      segments/date=YYYY-MM-DD/*.parquet   spans, one row per stored copy (the collector writes them)
      turnlens.duckdb                       the catalog: views over the segments (queries writes it)
      derived/                              the materialised per-turn state (queries writes it)
      alerts/                               alert state and history (alerts writes them)
"""

from __future__ import annotations

from pathlib import Path

SEGMENTS_DIR = "segments"
PARTITION_PREFIX = "date="
SEGMENT_SUFFIX = ".parquet"
CATALOG_FILE = "turnlens.duckdb"
DERIVED_DIR = "derived"
ALERTS_DIR = "alerts"


def segments_glob(store_dir: Path) -> str:
    """Absolute glob over every segment file of the store; temporary files never match it."""
    return str(Path(store_dir).resolve() / SEGMENTS_DIR / "*" / f"*{SEGMENT_SUFFIX}")
