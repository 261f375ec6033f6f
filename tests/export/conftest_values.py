"""The incident's clock, shared by the export fixtures and tests."""

from __future__ import annotations

from datetime import UTC, datetime

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)  # the user presses stop in s1/t1
T0_MS = int(T0.timestamp() * 1000)
