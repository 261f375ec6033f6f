"""OTLP/gRPC receiver: TraceService/Export (plus Logs and Metrics answered as the HTTP side does).

Requests arrive as raw bytes (no generated servicer), so they go through the same fast decoder as
OTLP/HTTP. gRPC enforces the size limit itself (RESOURCE_EXHAUSTED, decompressed size included);
overload answers UNAVAILABLE with a RetryInfo, which OTLP exporters honour as the retry delay.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from turnlens.collector import receiver as rx
from turnlens.collector.otlp_decode import OtlpDecodeError
from turnlens.collector.receiver import Overloaded, Receiver, ShuttingDown

TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
METRICS_SERVICE = "opentelemetry.proto.collector.metrics.v1.MetricsService"
WORKERS = 8


def _retry_trailers(code: int, message: str, retry_after_s: float) -> tuple[tuple[str, bytes], ...]:
    """RetryInfo twice: in the google.rpc.Status details (the standard way) and on its own key
    (what opentelemetry-python reads)."""
    delay = duration_pb2.Duration(seconds=int(retry_after_s), nanos=int((retry_after_s % 1) * 1e9))
    info = error_details_pb2.RetryInfo(retry_delay=delay)
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code, message=message, details=[detail])
    return (
        ("grpc-status-details-bin", status.SerializeToString()),
        ("google.rpc.retryinfo-bin", info.SerializeToString()),
    )


class _Export:
    """The unary Export handler of one service."""

    def __init__(self, receiver: Receiver, signal: str) -> None:
        self.receiver = receiver
        self.signal = signal

    def __call__(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        receiver = self.receiver
        metadata = dict(context.invocation_metadata())
        if not receiver.authorized(metadata.get("authorization")):
            receiver.stats.count("grpc-unauthenticated")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        try:
            with receiver.budget.hold() as reservation:
                reservation.grow(len(request))  # gRPC already holds the body: count it while decoding
                if self.signal != "traces":
                    return rx.other_signal_response(self.signal, request, json=False)
                result = receiver.export_traces(request, json=False)
                return rx.trace_response(result, json=False)
        except OtlpDecodeError as exc:
            receiver.stats.count("grpc-invalid")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except (ShuttingDown, Overloaded) as exc:
            receiver.stats.count("grpc-unavailable")
            context.set_trailing_metadata(_retry_trailers(rx.UNAVAILABLE, str(exc), exc.retry_after_s))
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        raise AssertionError("unreachable: context.abort raises")


def _handler(receiver: Receiver, service: str, signal: str) -> grpc.GenericRpcHandler:
    export: Callable[[Any, grpc.ServicerContext], Any] = _Export(receiver, signal)
    method = grpc.unary_unary_rpc_method_handler(export, request_deserializer=None, response_serializer=None)
    return grpc.method_handlers_generic_handler(service, {"Export": method})


class GrpcReceiver:
    """A grpc.Server bound to one address, serving the three OTLP services."""

    def __init__(self, host: str, port: int, receiver: Receiver) -> None:
        self.receiver = receiver
        limit = receiver.max_request_bytes
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="otlp-grpc"),
            handlers=[
                _handler(receiver, TRACE_SERVICE, "traces"),
                _handler(receiver, LOGS_SERVICE, "logs"),
                _handler(receiver, METRICS_SERVICE, "metrics"),
            ],
            options=[("grpc.max_receive_message_length", limit), ("grpc.so_reuseport", 0)],
            maximum_concurrent_rpcs=WORKERS * 4,
        )
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        bound = self.server.add_insecure_port(target)
        if not bound:
            raise OSError(f"cannot listen on {target} for OTLP/gRPC")
        self.address = (host, bound)

    def start(self) -> None:
        self.server.start()

    def stop(self, grace_s: float) -> None:
        """Refuses new RPCs at once, lets the running ones finish for up to `grace_s`."""
        self.server.stop(grace_s).wait()
