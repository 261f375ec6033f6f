"""The recorded sample (sample_data/sample.jsonl.gz) ingested once per test session, copied per user.

Ingesting the whole sample through `turnlens ingest` is one of the suite's most expensive setups, and many
tests start from exactly that store. `ingest_sample` builds it once (real `turnlens ingest`, with the fleet's
tool registry); `copy_store` gives a test its own copy to change, with its own catalog: the catalog names its
store's files by absolute path, so a copy needs one of its own, as after a move.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from turnlens.kernel.layout import segments_glob
from turnlens.queries.catalog import write_catalog

from turnlens.cli import main

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data" / "sample.jsonl.gz"
REGISTRY = REPO / "sample_data" / "tool_registry.toml"


def ingest_sample(store: Path) -> Path:
    """The recorded sample through the real `turnlens ingest` into a new store with the fleet's registry."""
    store.mkdir(parents=True)
    shutil.copy(REGISTRY, store / "tool_registry.toml")
    assert main(["ingest", "--store", str(store), "--quiet", str(SAMPLE)]) == 0
    return store


def copy_store(source: Path, store: Path) -> Path:
    """A copy of `source` at `store` that reads its own files: segments, registry, state and catalog."""
    shutil.copytree(source, store)
    write_catalog(store, segments_glob(store))
    return store
