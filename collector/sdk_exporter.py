"""An OpenTelemetry SDK SpanExporter writing straight into a turnlens store, for one-process apps and tests.

Spans go through the same OTLP encoding and decoder as the network receivers, so a store written
in-process holds exactly what `turnlens collect` would have stored.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from turnlens.collector.otlp_decode import decode_protobuf
from turnlens.collector.store import PrepareStore, Store, StoreOverloaded

logger = logging.getLogger(__name__)


class StoreSpanExporter(SpanExporter):
    """Exports to a Store (given, or opened on a directory and closed on shutdown).

    `export` returns SUCCESS once the spans are durable. Use it behind a BatchSpanProcessor: each
    export waits for a segment write.
    """

    def __init__(self, store: Store | Path | str, *, prepare_store: PrepareStore | None = None) -> None:
        """`prepare_store(dir, segments_glob)` runs once on a store opened here from a directory, e.g.
        `turnlens.queries.catalog.write_catalog` so that DuckDB can read the store at once."""
        if isinstance(store, Store):
            self.store = store
            self._owns_store = False
        else:
            root = Path(store)
            self.store = Store(root)
            if prepare_store is not None:
                prepare_store(root, self.store.segments_glob)
            self._owns_store = True
        self.rejected = 0
        self._shut_down = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shut_down:
            return SpanExportResult.FAILURE
        if not spans:
            return SpanExportResult.SUCCESS
        result = decode_protobuf(encode_spans(spans).SerializeToString())
        if result.rejected:
            self.rejected += result.rejected
            logger.warning("turnlens: %s", result.error_message())
        try:
            self.store.append(result.table)
        except StoreOverloaded as exc:
            logger.warning("turnlens: store overloaded, %d spans not stored: %s", len(spans), exc)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True  # export returns only once its spans are durable: nothing is ever pending here

    def shutdown(self) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        if self._owns_store:
            self.store.close()
