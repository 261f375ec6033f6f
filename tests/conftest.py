"""Fixtures every test folder may use; each folder keeps its own conftest for the rest."""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import samplestore

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def output_dir() -> Path:
    """Where tests leave artefacts a person may want to look at (screenshots, exports)."""
    path = Path(os.environ.get("TURNLENS_TEST_OUTPUT", REPO / "test-output"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session", autouse=True)
def _streamlit_components_scanned_once() -> Iterator[None]:
    """Each new AppTest (the dashboard's page tests) scans the metadata of every installed distribution for
    Streamlit components: ~1 s a page opened with the framework extras installed, where a server scans once
    at start. Nothing is installed while the tests run, so each process scans once."""
    from streamlit.components.v2 import manifest_scanner

    with pytest.MonkeyPatch.context() as patch:
        scan = functools.cache(manifest_scanner.scan_component_manifests)
        patch.setattr(manifest_scanner, "scan_component_manifests", scan)
        yield


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def free_port() -> Callable[[], int]:
    """Gives TCP ports on 127.0.0.1 that nothing listens on right now."""
    return _free_port


@pytest.fixture(scope="session")
def ingested_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded sample ingested once for the whole session. Never change it: take `sample_copy`."""
    return samplestore.ingest_sample(tmp_path_factory.mktemp("ingested-sample") / "store")


@pytest.fixture
def sample_copy(ingested_sample: Path, tmp_path: Path) -> Path:
    """This test's own copy of the ingested recorded sample (with the fleet's tool registry)."""
    return samplestore.copy_store(ingested_sample, tmp_path / "store")
