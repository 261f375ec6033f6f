"""A framework run's store and the questions the framework tests ask of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
from mock_openai import MockOpenAI
from turnlens.queries import catalog

HERE = Path(__file__).resolve().parent
# What a team adds once it points its framework at turnlens: the tiers of its tools.
REGISTRY = """\
[tools.get_weather]
tier = "read_only"

[tools.send_email]
tier = "soft_irreversible"
"""


class FrameworkRun:
    """The store one scenario wrote, and the questions the tests ask of it."""

    def __init__(self, store: Path, mock: MockOpenAI, output: str) -> None:
        self.store = store
        self.mock = mock
        self.output = output
        self._con: duckdb.DuckDBPyConnection | None = None

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Runs SQL on the store's catalog, on one read-only connection for the run's questions."""
        if self._con is None:
            self._con = catalog.connect(self.store)
        return self._con.execute(sql).fetchall()

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def turns(self) -> list[tuple[Any, ...]]:
        """(session_id, status) of every turn, in the order they started."""
        return self.query("select session_id, status from turns order by started_wall_ns")
