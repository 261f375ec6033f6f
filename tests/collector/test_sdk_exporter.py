"""The in-process SpanExporter: the OpenTelemetry SDK writing straight into a store that DuckDB reads."""

from __future__ import annotations

from pathlib import Path

import otlp_samples as s
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from turnlens.collector.sdk_exporter import StoreSpanExporter
from turnlens.queries.catalog import write_catalog


def test_spans_from_the_sdk_are_in_the_store_after_shutdown(tmp_path: Path) -> None:
    store = tmp_path / "store"
    resource = Resource.create({"service.name": "inproc", "service.instance.id": "p1"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(StoreSpanExporter(store, prepare_store=write_catalog)))
    tracer = provider.get_tracer("tests.sdk")
    for turn in range(3):
        with tracer.start_as_current_span("turn", attributes={"turnlens.turn.id": f"t{turn}"}):
            with tracer.start_as_current_span("tool", attributes={"gen_ai.operation.name": "execute_tool"}):
                pass
    provider.shutdown()
    rows = s.query(store, "select turn_id, count(*), count(layer) from spans group by 1 order by 1")
    assert rows == [("t0", 2, 1), ("t1", 2, 1), ("t2", 2, 1)]  # the tool span inherits its turn's id
    assert s.query(store, "select distinct node from spans") == [("p1",)]
