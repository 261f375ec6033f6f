"""Fixtures of the export tests: a store holding two incidents, each with findings of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import storebuilder
from conftest_values import T0_MS


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """s1/t1: send_email (hard-irreversible) committed 250 ms after the stop, the tool node 40 ms skewed.
    s2/t2, five seconds later: charge_card committed after the stop too, under its own call id and key.
    s1/t3, a minute later: a read-only search that stopped cleanly."""
    b = storebuilder.StoreBuilder(tmp_path_factory.mktemp("export") / "store")
    storebuilder.cancelled_turn(
        b,
        session="s1",
        turn="t1",
        t0_ms=T0_MS,
        ack_ms=650,
        call="call-email",
        key="key-email",
        node_skew_ms=40,
    )
    storebuilder.cancelled_turn(
        b,
        session="s2",
        turn="t2",
        t0_ms=T0_MS + 5000,
        tool="charge_card",
        tier="soft_irreversible",
        call="call-charge",
        key="key-charge",
    )
    storebuilder.cancelled_turn(
        b,
        session="s1",
        turn="t3",
        t0_ms=T0_MS + 60_000,
        tool="search",
        tier="read_only",
        commit_after_cancel=False,
        call="call-search",
        key="key-search",
    )
    return b.write()


@pytest.fixture
def turnlens(capsys: pytest.CaptureFixture[str]) -> Any:
    """Runs `turnlens ARGS…` in-process; returns (exit code, stdout, stderr)."""
    from turnlens.cli import main

    def run(*argv: object) -> tuple[int, str, str]:
        code = main([str(a) for a in argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
