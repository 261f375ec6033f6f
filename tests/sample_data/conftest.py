"""One mixed simulation shared by the sample_data tests: generating it is the expensive part."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from turnlens.sample_data.simulate import Simulation


@pytest.fixture(scope="session")
def mixed() -> tuple[Simulation, list[ReadableSpan]]:
    """150 sessions of the default mix (every scenario), with the HLC causality log on."""
    sim = Simulation(sessions=150, seed=2026, record_causality=True)
    spans = [span for batch in sim.batches() for span in batch]
    return sim, spans
