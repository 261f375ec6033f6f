"""The dashboard tests' store: built once per session and handed to the app through TURNLENS_STORE."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import samplestore
from dashboard_server import CHROMIUM, CHROMIUM_ARGS, NO_CHROMIUM
from turnlens.dashboard import data
from turnlens.kernel.layout import segments_glob
from turnlens.queries import catalog
from turnlens.queries.catalog import write_catalog

from . import storefixture

# When the alert runner evaluates the store: a few minutes after the incident turn.
ALERTS_AT = "2026-11-18T11:10:00Z"
REPO = Path(__file__).resolve().parents[2]
TURNLENS = Path(sys.executable).with_name("turnlens")


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small store with a cancelled-but-committed turn and a clean one, its real catalog, and the
    alert state the real `turnlens alerts run` leaves in it."""
    path = storefixture.build_store(tmp_path_factory.mktemp("dashboard-store"))
    turnlens = Path(sys.executable).with_name("turnlens")
    run = subprocess.run(
        [
            str(turnlens),
            "alerts",
            "run",
            "--store",
            str(path),
            "--at",
            ALERTS_AT,
            "--notify",
            f"file:{path}/n.jsonl",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode in (0, 1, 2), run.stderr  # 1/2: warnings/criticals firing, as intended
    os.environ["TURNLENS_STORE"] = str(path)
    return path


@pytest.fixture(scope="session")
def snapshot_store(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of `store` with a snapshot, as the collector keeps one: the per-turn views read its files."""
    path = tmp_path_factory.mktemp("snapshot-store") / "store"
    shutil.copytree(store, path)
    # the catalog names its store's files by absolute path: a copied store gets its own, as after a move
    write_catalog(path, segments_glob(path))
    _materialize(path)
    return path


def _materialize(store: Path) -> None:
    """The store's derived state, by the real `turnlens materialize` (what the collector runs)."""
    run = subprocess.run(
        [str(TURNLENS), "materialize", "--store", str(store), "--margin", "0", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr


@pytest.fixture()
def on_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], None]]:
    """Points the dashboard (AppTest pages) at another store for one test; the session's store after it."""

    def point(path: Path) -> None:
        monkeypatch.setenv(data.STORE_ENV, str(path))
        data.settings.cache_clear()

    yield point
    data.settings.cache_clear()


@pytest.fixture(scope="session")
def sample_store(ingested_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulator's recorded sample (every finding kind) through the real `turnlens ingest`, with the
    fleet's tool registry, its derived state (as the collector keeps it: the pages read what a user of
    `make demo` sees, not the live views a store without one falls back to) and the alert state of one
    `turnlens alerts run` over it (on a copy of the session's ingested sample)."""
    path = samplestore.copy_store(ingested_sample, tmp_path_factory.mktemp("sample-store") / "store")
    _materialize(path)
    con = catalog.connect(path)
    try:
        newest_ms = int(data.run_named(con, "store_bounds", {})["newest_ms"].iloc[0])
    finally:
        con.close()
    at = datetime.fromtimestamp(newest_ms / 1000 + 60, tz=UTC).isoformat()  # a minute after the last turn
    run = subprocess.run(
        [
            str(TURNLENS),
            "alerts",
            "run",
            "--store",
            str(path),
            "--at",
            at,
            "--notify",
            f"file:{path}/n.jsonl",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode in (0, 1, 2), run.stderr
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Chromium (Debian's, driven by Playwright), one per test module."""
    if not CHROMIUM.exists():
        pytest.fail(NO_CHROMIUM)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
