"""What the OTLP/HTTP and OTLP/gRPC receivers share: auth, the memory budget, decode-then-append, responses.

Both transports call `Receiver.export_traces`, which returns only after Store.append did (the rows
are durable), and map its exceptions to their own status codes.
"""

from __future__ import annotations

import hmac
import math
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from turnlens.collector import otlp_decode
from turnlens.collector.otlp_decode import DecodeResult, OtlpDecodeError
from turnlens.collector.store import Store, StoreClosed, StoreOverloaded, StoreWriteError

# Logs and metrics are accepted and dropped with a partial-success answer naming the count, so a
# Collector pipeline or SDK sending every signal to one endpoint keeps working and says why.
OTHER_SIGNAL_MESSAGE = "turnlens stores traces only; these {what} were dropped (send them to another backend)"


class Overloaded(Exception):
    """Shed this request: nothing of it was stored; the client should retry after `retry_after_s`."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ShuttingDown(Overloaded):
    """The collector is stopping (or cannot write): retry, possibly against another instance."""


class InflightBudget:
    """Bytes of request bodies held at once (read, decompressed, being decoded), bounded.

    A request that does not fit is refused with Overloaded, unless nothing else is in flight: one
    request up to the size limit is always admitted, so memory stays within the budget plus one.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self._used

    @contextmanager
    def hold(self) -> Iterator[Reservation]:
        reservation = Reservation(self)
        try:
            yield reservation
        finally:
            reservation.release()

    def admit(self) -> None:
        """Refuses a new request at once (Overloaded) while the budget is used up, before any of its body is
        read; one that is admitted still reserves its bytes as they arrive."""
        with self._lock:
            if self._used >= self.limit:
                raise Overloaded(
                    f"{self._used} bytes of requests in flight (limit {self.limit}); retry shortly", 1.0
                )

    def _take(self, n: int, already: int) -> None:
        with self._lock:
            if self._used + n > self.limit and self._used > already:
                raise Overloaded(
                    f"{self._used} bytes of requests in flight (limit {self.limit}); retry shortly", 1.0
                )
            self._used += n

    def _give(self, n: int) -> None:
        with self._lock:
            self._used -= n


class Reservation:
    """The bytes one request holds; grown as its body is read, released when it is answered."""

    def __init__(self, budget: InflightBudget) -> None:
        self._budget = budget
        self.held = 0

    def grow(self, n: int) -> None:
        self._budget._take(n, self.held)
        self.held += n

    def release(self) -> None:
        self._budget._give(self.held)
        self.held = 0


@dataclass
class ReceiverStats:
    """What the receivers did since start, printed on shutdown and read by the benchmark."""

    requests: Counter[str] = field(default_factory=Counter)  # by outcome
    spans_stored: int = 0
    spans_rejected: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, outcome: str, stored: int = 0, rejected: int = 0) -> None:
        with self.lock:
            self.requests[outcome] += 1
            self.spans_stored += stored
            self.spans_rejected += rejected


class Receiver:
    """Decodes an export request, stores its valid spans durably, and says what was rejected."""

    def __init__(
        self, store: Store, *, token: str | None, max_request_bytes: int, max_inflight_bytes: int,
        read_timeout_s: float = 30.0, header_timeout_s: float = 10.0,
    ) -> None:
        self.store = store
        self.token = token
        self.max_request_bytes = max_request_bytes
        self.read_timeout_s = read_timeout_s  # a request's body must arrive within this (HTTP: 408 after)
        self.header_timeout_s = header_timeout_s  # HTTP: its request line and headers, within this
        self.budget = InflightBudget(max(max_inflight_bytes, 1))
        self.stats = ReceiverStats()
        self.stopping = threading.Event()

    def authorized(self, authorization: str | None) -> bool:
        """True when no token is configured, or `Authorization: Bearer <token>` matches it."""
        if not self.token:
            return True
        if not authorization:
            return False
        scheme, _, credentials = authorization.strip().partition(" ")
        credentials = credentials.strip()
        if not credentials.isascii():  # never the (ASCII) token; compare_digest would raise
            return False
        return scheme.lower() == "bearer" and hmac.compare_digest(credentials, self.token)

    def export_traces(self, body: bytes, *, json: bool) -> DecodeResult:
        """Decodes and appends; returns once durable. Raises OtlpDecodeError, Overloaded, ShuttingDown."""
        result = otlp_decode.decode_json(body) if json else otlp_decode.decode_protobuf(body)
        try:
            if result.table.num_rows:
                self.store.append(result.table)
        except StoreOverloaded as exc:
            raise Overloaded(str(exc), exc.retry_after_s) from None
        except StoreClosed:
            raise ShuttingDown("the collector is shutting down", 1.0) from None
        except StoreWriteError as exc:
            raise ShuttingDown(f"could not write to the store: {exc}", 5.0) from None
        self.stats.count("ok" if not result.rejected else "partial", result.accepted, result.rejected)
        return result


# --- responses ----------------------------------------------------------------------------------


def trace_response(result: DecodeResult, *, json: bool) -> bytes:
    """ExportTraceServiceResponse, with partial_success only when spans were rejected."""
    if json:
        if not result.rejected:
            return b"{}"
        partial = {"rejectedSpans": str(result.rejected), "errorMessage": result.error_message()}
        return orjson.dumps({"partialSuccess": partial})
    response = ExportTraceServiceResponse()
    if result.rejected:
        response.partial_success.rejected_spans = result.rejected
        response.partial_success.error_message = result.error_message()
    return response.SerializeToString()


def status_body(code: int, message: str, *, json: bool) -> bytes:
    """A google.rpc.Status, the body OTLP/HTTP prescribes for error responses."""
    if json:
        return orjson.dumps({"code": code, "message": message})
    return status_pb2.Status(code=code, message=message).SerializeToString()


INVALID_ARGUMENT = code_pb2.INVALID_ARGUMENT
UNAUTHENTICATED = code_pb2.UNAUTHENTICATED
UNAVAILABLE = code_pb2.UNAVAILABLE
RESOURCE_EXHAUSTED = code_pb2.RESOURCE_EXHAUSTED
UNIMPLEMENTED = code_pb2.UNIMPLEMENTED
INTERNAL = code_pb2.INTERNAL
DEADLINE_EXCEEDED = code_pb2.DEADLINE_EXCEEDED


def retry_after_header(seconds: float) -> str:
    """Retry-After takes whole seconds; round up so a client never comes back too early."""
    return str(max(1, math.ceil(seconds)))


def other_signal_response(signal: str, body: bytes, *, json: bool) -> bytes:
    """The answer to /v1/logs and /v1/metrics: success, with every item reported rejected."""
    if signal == "logs":
        count = _count_log_records(body, json=json)
        message = OTHER_SIGNAL_MESSAGE.format(what="log records")
        if json:
            partial = {"rejectedLogRecords": str(count), "errorMessage": message}
            return orjson.dumps({"partialSuccess": partial})
        logs = ExportLogsServiceResponse()
        logs.partial_success.rejected_log_records = count
        logs.partial_success.error_message = message
        return logs.SerializeToString()
    count = _count_data_points(body, json=json)
    message = OTHER_SIGNAL_MESSAGE.format(what="data points")
    if json:
        return orjson.dumps({"partialSuccess": {"rejectedDataPoints": str(count), "errorMessage": message}})
    metrics = ExportMetricsServiceResponse()
    metrics.partial_success.rejected_data_points = count
    metrics.partial_success.error_message = message
    return metrics.SerializeToString()


def _loads(body: bytes) -> Any:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise OtlpDecodeError("an OTLP/JSON request is an object")
    return document


def _count_log_records(body: bytes, *, json: bool) -> int:
    if json:
        document = _loads(body)
        return sum(
            len(scope.get("logRecords") or [])
            for resource in document.get("resourceLogs") or []
            for scope in resource.get("scopeLogs") or []
        )
    try:
        request = ExportLogsServiceRequest.FromString(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"not a protobuf ExportLogsServiceRequest: {exc}") from None
    return sum(len(scope.log_records) for resource in request.resource_logs for scope in resource.scope_logs)


_METRIC_KINDS = ("gauge", "sum", "histogram", "exponentialHistogram", "summary")


def _count_data_points(body: bytes, *, json: bool) -> int:
    if json:
        document = _loads(body)
        return sum(
            len((metric.get(kind) or {}).get("dataPoints") or [])
            for resource in document.get("resourceMetrics") or []
            for scope in resource.get("scopeMetrics") or []
            for metric in scope.get("metrics") or []
            for kind in _METRIC_KINDS
        )
    try:
        request = ExportMetricsServiceRequest.FromString(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"not a protobuf ExportMetricsServiceRequest: {exc}") from None
    total = 0
    for resource in request.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                if kind:
                    total += len(getattr(metric, kind).data_points)
    return total
