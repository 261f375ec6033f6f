"""The dashboard tests' store: built once per session and handed to the app through TURNLENS_STORE."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from . import storefixture


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small store with a cancelled-but-committed turn and a clean one, and its real catalog."""
    path = storefixture.build_store(tmp_path_factory.mktemp("dashboard-store"))
    os.environ["TURNLENS_STORE"] = str(path)
    return path
