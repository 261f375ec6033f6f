"""OTLP/HTTP receiver: POST /v1/traces (protobuf or JSON, maybe gzip) with the specification's status codes.

A thread per connection (HTTP/1.1 keep-alive) is enough: decoding holds the GIL anyway, and a
request of 512 spans spends far longer in decode than in the HTTP parsing around it. Bodies are
read and decompressed in pieces against a size limit, so neither a large body nor a gzip bomb can
exhaust memory.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
import traceback
import zlib
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from turnlens.collector import receiver as rx
from turnlens.collector.otlp_decode import OtlpDecodeError
from turnlens.collector.receiver import Overloaded, Receiver, Reservation, ShuttingDown

TRACES_PATH = "/v1/traces"
OTHER_SIGNALS = {"/v1/logs": "logs", "/v1/metrics": "metrics"}
PROTOBUF_TYPES = ("application/x-protobuf", "application/protobuf")
JSON_TYPE = "application/json"
READ_PIECE = 1024 * 1024
DRAIN_LIMIT = 64 * 1024 * 1024  # after an early refusal, read and discard up to this much of the body
IDLE_TIMEOUT_S = 120.0  # a keep-alive connection with no request for this long is closed


class HttpError(Exception):
    """An answer other than 200: status, google.rpc.Status code and message, optional Retry-After."""

    def __init__(self, status: int, code: int, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after_s = retry_after_s


def _gzip_member() -> Any:
    """A decompressor of one gzip member (header, deflate data, trailer)."""
    return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)


class OtlpHttpServer(ThreadingHTTPServer):
    """The listening socket and the receiver its handlers call; counts requests in progress."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], receiver: Receiver) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, OtlpHandler)
        self.receiver = receiver
        self._active = 0
        self._idle = threading.Condition()

    def begin(self) -> None:
        with self._idle:
            self._active += 1

    def end(self) -> None:
        with self._idle:
            self._active -= 1
            self._idle.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Waits until no request is in progress; False if some still are after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._active:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True


class OtlpHandler(BaseHTTPRequestHandler):
    """One connection; each request answered per the OTLP/HTTP specification."""

    protocol_version = "HTTP/1.1"
    server_version = "turnlens"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S
    server: OtlpHttpServer
    _unread = 0  # bytes of the current request's body not read yet; -1: unknown

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        """Quiet: one line per request would cost more than the request at full load."""

    # --- methods --------------------------------------------------------------------------------

    def do_POST(self) -> None:
        self.server.begin()
        try:
            self._unread = self._body_length()
            self._post()
        finally:
            self.server.end()

    def _body_length(self) -> int:
        """Bytes of body still to read: -1 when unknown (chunked, or a malformed length)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return -1
        length = self.headers.get("Content-Length")
        if length is None:
            return 0
        return int(length) if length.strip().isdigit() else -1

    def _refuse_method(self) -> None:
        self._unread = self._body_length()
        path = self.path.split("?", 1)[0]
        if path == TRACES_PATH or path in OTHER_SIGNALS:
            self._send_error(HttpError(405, rx.UNIMPLEMENTED, f"{self.command} is not allowed; use POST"))
        else:
            self._send_error(HttpError(404, rx.UNIMPLEMENTED, f"no such endpoint: {path}"))

    do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def do_HEAD(self) -> None:
        self._refuse_method()

    # --- POST -----------------------------------------------------------------------------------

    def _post(self) -> None:
        receiver = self.server.receiver
        json = self._is_json()
        try:
            path = self.path.split("?", 1)[0]
            if path != TRACES_PATH and path not in OTHER_SIGNALS:
                raise HttpError(404, rx.UNIMPLEMENTED, f"no such endpoint: {path}")
            if not receiver.authorized(self.headers.get("Authorization")):
                raise HttpError(401, rx.UNAUTHENTICATED, "missing or wrong bearer token")
            content_type = self._media_type()
            if content_type not in PROTOBUF_TYPES and content_type != JSON_TYPE:
                raise HttpError(
                    415, rx.INVALID_ARGUMENT,
                    f"unsupported Content-Type {content_type!r}; use application/x-protobuf or "
                    "application/json",
                )
            if receiver.stopping.is_set():
                raise HttpError(503, rx.UNAVAILABLE, "the collector is shutting down", 1.0)
            with receiver.budget.hold() as reservation:
                body = self._read_body(reservation, receiver.max_request_bytes)
                if path in OTHER_SIGNALS:
                    response = rx.other_signal_response(OTHER_SIGNALS[path], body, json=json)
                else:
                    result = receiver.export_traces(body, json=json)
                    response = rx.trace_response(result, json=json)
                del body
        except HttpError as exc:
            receiver.stats.count(str(exc.status))
            self._send_error(exc)
            return
        except OtlpDecodeError as exc:
            receiver.stats.count("400")
            self._send_error(HttpError(400, rx.INVALID_ARGUMENT, str(exc)))
            return
        except ShuttingDown as exc:
            receiver.stats.count("503")
            self._send_error(HttpError(503, rx.UNAVAILABLE, str(exc), exc.retry_after_s))
            return
        except Overloaded as exc:
            receiver.stats.count("429")
            self._send_error(HttpError(429, rx.UNAVAILABLE, str(exc), exc.retry_after_s))
            return
        except Exception as exc:  # noqa: BLE001 - a bug must cost one request, not the connection thread
            receiver.stats.count("500")
            traceback.print_exc(file=sys.stderr)
            self.close_connection = True
            self._send_error(HttpError(500, rx.INTERNAL, f"internal error: {exc!r}"))
            return
        self._send(200, response, json=json)

    def _media_type(self) -> str:
        return (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()

    def _is_json(self) -> bool:
        return self._media_type() == JSON_TYPE

    def _read_body(self, reservation: Reservation, limit: int) -> bytes:
        """The request body, decompressed, at most `limit` bytes (413 past it)."""
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding not in ("identity", "gzip", "x-gzip"):
            self.close_connection = True
            raise HttpError(415, rx.INVALID_ARGUMENT, f"unsupported Content-Encoding {encoding!r}; use gzip")
        chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        length_header = self.headers.get("Content-Length")
        if not chunked:
            if length_header is None:
                self.close_connection = True
                raise HttpError(411, rx.INVALID_ARGUMENT, "Content-Length is required")
            try:
                length = int(length_header)
            except ValueError:
                self.close_connection = True
                raise HttpError(400, rx.INVALID_ARGUMENT, "malformed Content-Length") from None
            if length < 0:
                self.close_connection = True
                raise HttpError(400, rx.INVALID_ARGUMENT, "malformed Content-Length")
            if length > limit:
                self._drain(length)
                raise HttpError(413, rx.RESOURCE_EXHAUSTED, f"request of {length} bytes exceeds {limit}")
            self._reserve(reservation, length if encoding == "identity" else 0, length)
            pieces = self._pieces(length)
        else:
            pieces = self._chunked_pieces(limit)
        if encoding == "identity":
            return self._collect(pieces, reservation, limit, grow=chunked)
        return self._gunzip(pieces, reservation, limit)

    def _reserve(self, reservation: Reservation, n: int, unread: int) -> None:
        try:
            reservation.grow(n)
        except Overloaded:
            self._drain(unread)
            raise

    def _pieces(self, length: int) -> Iterator[bytes]:
        remaining = length
        while remaining > 0:
            piece = self.rfile.read(min(READ_PIECE, remaining))
            if not piece:
                self.close_connection = True
                raise HttpError(400, rx.INVALID_ARGUMENT, "the body ended before Content-Length bytes")
            remaining -= len(piece)
            self._unread = remaining
            yield piece

    def _chunked_pieces(self, limit: int) -> Iterator[bytes]:
        """A chunked body; one refused midway is not drained (length unknown): the connection closes."""
        total = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                self.close_connection = True
                raise HttpError(400, rx.INVALID_ARGUMENT, "malformed chunked body") from None
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                self._unread = 0
                return
            total += size
            if total > limit * 2:  # compressed bodies only shrink... unless hostile; stop reading
                self.close_connection = True
                raise HttpError(413, rx.RESOURCE_EXHAUSTED, f"request exceeds {limit} bytes")
            remaining = size
            while remaining > 0:
                piece = self.rfile.read(min(READ_PIECE, remaining))
                if not piece:
                    self.close_connection = True
                    raise HttpError(400, rx.INVALID_ARGUMENT, "the body ended inside a chunk")
                remaining -= len(piece)
                yield piece
            self.rfile.readline(16)

    def _collect(self, pieces: Iterator[bytes], reservation: Reservation, limit: int, *, grow: bool) -> bytes:
        body = bytearray()
        for piece in pieces:
            body += piece
            if grow:
                self._grow_or_drop(reservation, len(piece))
            if len(body) > limit:
                self._drop_rest()
                raise HttpError(413, rx.RESOURCE_EXHAUSTED, f"request exceeds {limit} bytes")
        return bytes(body)

    def _gunzip(self, pieces: Iterator[bytes], reservation: Reservation, limit: int) -> bytes:
        """Decompresses piece by piece, never producing more than `limit` + 1 bytes (gzip bombs).

        A body may hold several gzip members one after another (RFC 9110 allows it, and concatenated
        `gzip` output looks so): each is decoded. Bytes after a member that do not start another are
        refused, as is a member cut short, rather than storing a request only partly read.
        """
        inflater = _gzip_member()
        fed = False  # the current member has been given bytes
        members = 0
        body = bytearray()
        try:
            for piece in pieces:
                data = piece
                while data:
                    out = inflater.decompress(data, limit + 1 - len(body))
                    fed = True
                    body += out
                    self._grow_or_drop(reservation, len(out))
                    if len(body) > limit:
                        self._drop_rest()
                        raise HttpError(
                            413, rx.RESOURCE_EXHAUSTED, f"request exceeds {limit} bytes after decompression"
                        )
                    if inflater.eof:
                        data = inflater.unused_data
                        inflater, fed, members = _gzip_member(), False, members + 1
                    else:
                        data = inflater.unconsumed_tail
        except zlib.error as exc:
            self._drop_rest()
            what = "bytes after the gzip data that are not gzip" if members else "not gzip"
            raise HttpError(400, rx.INVALID_ARGUMENT, f"Content-Encoding gzip, but {what}: {exc}") from None
        if fed or not members:
            raise HttpError(400, rx.INVALID_ARGUMENT, "the gzip stream is truncated")
        return bytes(body)

    def _grow_or_drop(self, reservation: Reservation, n: int) -> None:
        try:
            reservation.grow(n)
        except Overloaded:
            self._drop_rest()
            raise

    def _drop_rest(self) -> None:
        """Leaves the connection ready for the next request: the rest of this body is read or it closes."""
        if self._unread < 0:
            self.close_connection = True
        elif self._unread > 0:
            self._drain(self._unread)

    def _drain(self, n: int) -> None:
        """Reads and discards the rest of a refused body so the client sees the answer, not a reset."""
        if n > DRAIN_LIMIT:
            self.close_connection = True
            return
        while n > 0:
            piece = self.rfile.read(min(READ_PIECE, n))
            if not piece:
                break
            n -= len(piece)
        self._unread = 0

    # --- answers --------------------------------------------------------------------------------

    def _send_error(self, error: HttpError) -> None:
        self._drop_rest()
        json = self._is_json()
        body = rx.status_body(error.code, str(error), json=json)
        headers = {}
        if error.retry_after_s is not None:
            headers["Retry-After"] = rx.retry_after_header(error.retry_after_s)
        if error.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="turnlens"'
        if error.status == 405:
            headers["Allow"] = "POST"
        if error.status == 503:
            self.close_connection = True
        self._send(error.status, body, json=json, headers=headers)

    def _send(self, status: int, body: bytes, *, json: bool, headers: dict[str, str] | None = None) -> None:
        self.send_response(status, HTTPStatus(status).phrase)
        self.send_header("Content-Type", JSON_TYPE if json else PROTOBUF_TYPES[0])
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class HttpReceiver:
    """Runs an OtlpHttpServer in a background thread."""

    def __init__(self, host: str, port: int, receiver: Receiver) -> None:
        self.server = OtlpHttpServer((host, port), receiver)
        self.address = self.server.server_address[:2]
        self._thread = threading.Thread(target=self.server.serve_forever, name="otlp-http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop_accepting(self) -> None:
        """Closes the listening socket; requests already being handled go on."""
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()

    def wait_idle(self, timeout_s: float) -> bool:
        return self.server.wait_idle(timeout_s)
