"""OTLP/gRPC receiver: TraceService/Export (plus Logs and Metrics answered as the HTTP side does).

Requests arrive as raw bytes (no generated servicer), so they go through the same fast decoder as
OTLP/HTTP. gRPC enforces the size limit itself (RESOURCE_EXHAUSTED, decompressed size included).
A call's message is taken from gRPC (and copied into Python) only once the call is admitted: the
in-flight budget has room and one of a few receive slots is free; it is then held against the budget
while it is decoded and stored. Until then gRPC's transport takes in only the start of a call's
message (what flow control lets through; BDP probing, which would widen the window, is off), so what
receiving costs besides the budget is bounded per connection (STREAMS_PER_CONNECTION calls) and by the
number of connections, which gRPC itself caps (`max_grpc_connections`: one more is closed as accepted).
Connections idle for IDLE_CONNECTION_S are closed, so exporters that went quiet do not keep others
out. A message must arrive within the read timeout once its receiving began, or the call is
cancelled and its slot freed (docs/collector-limits.md).

Every refusal for load is UNAVAILABLE with a RetryInfo, which OTLP exporters honour as the retry
delay; gRPC's own concurrency limit is not used, as its RESOURCE_EXHAUSTED without RetryInfo makes
exporters drop the data. A connection past the cap, and a cancelled call, are seen by the exporter as
UNAVAILABLE and CANCELLED, which it retries too.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

# The collector starts its maintenance children by fork and exec (maintenance.start_child: a preexec_fn sets
# their priority and parent-death signal). gRPC's fork support restarts its poller thread in the child, where
# subprocess closes the poller's epoll descriptor before exec, and the child then aborts (SIGABRT) before it
# runs: 5 forks in 300 with grpcio 1.85 while calls were served (grpc/grpc#43055). No child uses gRPC, so
# the collector turns fork support off, before gRPC is first imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc  # noqa: E402 - after the setting above
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from turnlens.collector import receiver as rx
from turnlens.collector.otlp_decode import OtlpDecodeError
from turnlens.collector.receiver import Overloaded, Receiver, ShuttingDown

TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
METRICS_SERVICE = "opentelemetry.proto.collector.metrics.v1.MetricsService"
WORKERS = 16  # calls handled at once; more wait in the pool's queue with only their stream window buffered
STREAMS_PER_CONNECTION = 4
RECEIVE_WAIT_S = 5.0  # how long an admitted call may wait for a receive slot before UNAVAILABLE
IDLE_CONNECTION_S = 120.0  # a connection with no call for this long is closed (as OTLP/HTTP's keep-alive)


def receive_slots(max_request_bytes: int, max_inflight_bytes: int) -> int:
    """Calls whose message may be received at once: as many largest requests as the budget holds (at least
    one), so messages arriving but not yet counted add at most about one budget to memory."""
    return max(1, min(WORKERS, max_inflight_bytes // max(max_request_bytes, 1)))


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
    """The Export handler of one service, registered as client-streaming so the handler decides when
    (and whether) the single request message is received."""

    def __init__(self, receiver: Receiver, signal: str, receive_slots: threading.BoundedSemaphore) -> None:
        self.receiver = receiver
        self.signal = signal
        self.receive_slots = receive_slots

    def __call__(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
        receiver = self.receiver
        metadata = dict(context.invocation_metadata())
        if not receiver.authorized(metadata.get("authorization")):
            receiver.stats.count("grpc-unauthenticated")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        try:
            if receiver.stopping.is_set():
                raise ShuttingDown("the collector is shutting down", 1.0)
            with receiver.budget.hold() as reservation:
                request = self._receive(requests, context)
                reservation.grow(len(request))  # held while it is decoded and stored
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

    def _receive(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
        """The one request message, pulled once the budget has room and a receive slot is free (Overloaded
        otherwise): at most RECEIVE_SLOTS messages are being received without being counted yet."""
        self.receiver.budget.admit()
        if not self.receive_slots.acquire(timeout=RECEIVE_WAIT_S):
            raise Overloaded(f"{RECEIVE_WAIT_S:g} s without a free receive slot; retry shortly", 1.0)
        timeout = self.receiver.read_timeout_s
        too_slow = threading.Timer(timeout, context.cancel)  # frees the slot from a message trickling in
        try:
            self.receiver.budget.admit()  # the wait may have filled it
            too_slow.start()
            request = next(requests, None)
            extra = next(requests, None) if request is not None else None  # the end of the stream, in time
        except grpc.RpcError:  # cancelled: by the timer, or by the client
            self.receiver.stats.count("grpc-too-slow" if too_slow.finished.is_set() else "grpc-cancelled")
            message = f"the message did not arrive within {timeout:g} s"
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, message)
            raise AssertionError("unreachable: context.abort raises") from None
        finally:
            too_slow.cancel()
            self.receive_slots.release()
        if request is None or extra is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Export takes exactly one request message")
            raise AssertionError("unreachable: context.abort raises")
        return request


def _handler(
    receiver: Receiver, service: str, signal: str, receive_slots: threading.BoundedSemaphore
) -> grpc.GenericRpcHandler:
    export: Callable[[Any, grpc.ServicerContext], Any] = _Export(receiver, signal, receive_slots)
    method = grpc.stream_unary_rpc_method_handler(export, request_deserializer=None, response_serializer=None)
    return grpc.method_handlers_generic_handler(service, {"Export": method})


class GrpcReceiver:
    """A grpc.Server bound to one address, serving the three OTLP services."""

    def __init__(self, host: str, port: int, receiver: Receiver, *, max_connections: int = 256) -> None:
        self.receiver = receiver
        limit = receiver.max_request_bytes
        slots = threading.BoundedSemaphore(receive_slots(limit, receiver.budget.limit))
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="otlp-grpc"),
            handlers=[
                _handler(receiver, TRACE_SERVICE, "traces", slots),
                _handler(receiver, LOGS_SERVICE, "logs", slots),
                _handler(receiver, METRICS_SERVICE, "metrics", slots),
            ],
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.so_reuseport", 0),
                # A call not yet admitted may only have its stream's window of bytes buffered here: without
                # BDP probing that window stays at its initial 64 KiB instead of growing toward the message.
                ("grpc.http2.bdp_probe", 0),
                # gRPC reads a call's whole message as soon as the call starts, admitted or not: per
                # connection, at most this many calls (and their messages) at once; clients queue the rest.
                ("grpc.max_concurrent_streams", STREAMS_PER_CONNECTION),
                # Connections, and so the windows and buffers of their calls, are bounded: one more is
                # closed as soon as it is accepted (the exporter sees UNAVAILABLE and retries).
                ("grpc.max_allowed_incoming_connections", max(1, max_connections)),
                ("grpc.max_connection_idle_ms", int(IDLE_CONNECTION_S * 1000)),
                # a connection that never completes its HTTP/2 handshake holds its place this long at most
                ("grpc.server_handshake_timeout_ms", max(1, int(receiver.header_timeout_s * 1000))),
            ],
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
