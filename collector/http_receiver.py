"""OTLP/HTTP receiver: POST /v1/traces (protobuf or JSON, maybe gzip) with the specification's status codes.

A thread per connection (HTTP/1.1 keep-alive) is enough: decoding holds the GIL anyway, and a
request of 512 spans spends far longer in decode than in the HTTP parsing around it. Bodies are
read and decompressed in pieces against a size limit, so neither a large body nor a gzip bomb can
exhaust memory.
"""

from __future__ import annotations

import contextlib
import io
import re
import socket
import sys
import threading
import time
import traceback
import zlib
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NoReturn, cast

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
MAX_TRAILERS = 64  # trailer lines after a chunked body
_DIGITS = re.compile(r"[0-9]+")
_HEX = re.compile(rb"[0-9A-Fa-f]+")


class HttpError(Exception):
    """An answer other than 200: status, google.rpc.Status code and message, optional Retry-After."""

    def __init__(self, status: int, code: int, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after_s = retry_after_s


def read_line_by(
    rfile: io.BufferedReader, sock: socket.socket, deadline: float, limit: int, line: bytearray | None = None
) -> bytes:
    """One line (up to `limit` bytes; fewer at the end of the stream) that must have arrived by `deadline`
    (time.monotonic()), TimeoutError otherwise: each wait for bytes gets only the time left, so a line
    trickling in a byte at a time cannot hold the reader past the deadline. `line` collects the bytes read,
    also those of a line cut short by the deadline."""
    line = bytearray() if line is None else line
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the deadline passed")
        sock.settimeout(remaining)
        buffered = rfile.peek(1)  # what has arrived (at most one socket read)
        if not buffered:
            return bytes(line)
        room = limit - len(line)
        newline = buffered.find(b"\n", 0, room)
        line += rfile.read(newline + 1 if newline >= 0 else min(len(buffered), room))
        if newline >= 0 or len(line) >= limit:
            return bytes(line)


class HeaderTimeout(Exception):
    """The request line and headers did not arrive within the header timeout."""


class _HeaderReader:
    """The connection's reader while a request's line and headers arrive: every readline() (the standard
    library reads them a line at a time) against the header deadline."""

    def __init__(self, rfile: io.BufferedReader, sock: socket.socket, deadline: float) -> None:
        self._rfile = rfile
        self._sock = sock
        self._deadline = deadline
        self.received = 0  # bytes of the request read so far

    def readline(self, limit: int = -1) -> bytes:
        line = bytearray()
        try:
            limit = limit if limit >= 0 else 1 << 20
            return read_line_by(self._rfile, self._sock, self._deadline, limit, line)
        except TimeoutError:
            raise HeaderTimeout from None
        finally:
            self.received += len(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rfile, name)


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
    _unread = 0  # bytes of the current request's body not read yet; -1: unknown (close after answering)
    _deadline = 0.0  # time.monotonic() by which the current request's body must have arrived
    _requests = 0  # requests begun on this connection

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        """Quiet: one line per request would cost more than the request at full load."""

    # --- the request line and headers, against the header timeout --------------------------------

    def handle_one_request(self) -> None:
        """One request, its line and headers due within the header timeout of its start: on a new
        connection the start is the connection itself, on a kept-alive one the first byte after the idle
        wait. A client trickling its headers (or sending nothing at all) holds its thread for that long,
        not for the idle timeout, and gets 408 with the connection closed."""
        raw = cast(io.BufferedReader, self.rfile)
        header_timeout = self.server.receiver.header_timeout_s
        if self._requests:
            self.connection.settimeout(self.timeout)
            try:
                if not raw.peek(1):  # the client closed the connection
                    self.close_connection = True
                    return
            except OSError:  # idle past the idle timeout, or reset
                self.close_connection = True
                return
        self._requests += 1
        self.command, self.requestline, self.request_version = "", "", self.protocol_version
        if hasattr(self, "headers"):
            del self.headers  # the previous request's: the answer to this one must not follow them
        reader = _HeaderReader(raw, self.connection, time.monotonic() + header_timeout)
        self.rfile = cast(Any, reader)
        try:
            super().handle_one_request()
        except HeaderTimeout:
            self.rfile = raw
            self.close_connection = True
            if not reader.received:
                return  # nothing of a request arrived: nothing to answer
            self.server.receiver.stats.count("408")
            self._unread = -1
            self.connection.settimeout(1.0)  # a client that does not read its answer does not hold us
            with contextlib.suppress(OSError):
                message = f"the request headers did not arrive within {header_timeout:g} s"
                self._send_error(HttpError(408, rx.DEADLINE_EXCEEDED, message))
                self.wfile.flush()
        finally:
            self.rfile = raw

    def parse_request(self) -> bool:
        """The standard library's parsing of the line and headers, then the body is read without the header
        deadline (it has its own, the read timeout)."""
        try:
            return super().parse_request()
        finally:
            reader = self.rfile
            if isinstance(reader, _HeaderReader):
                self.rfile = cast(Any, reader._rfile)
            self.connection.settimeout(self.timeout)

    # --- methods --------------------------------------------------------------------------------

    def do_POST(self) -> None:
        if not self._version_supported():
            return
        self.server.begin()
        try:
            self._deadline = time.monotonic() + self.server.receiver.read_timeout_s
            try:
                chunked, length = self._framing()
            except HttpError as exc:
                self._unread = -1
                self.server.receiver.stats.count(str(exc.status))
                self._send_error(exc)
                return
            self._unread = -1 if chunked else length or 0
            self._post(chunked, length)
        finally:
            self.server.end()
            if not self.close_connection:
                self.connection.settimeout(self.timeout)  # keep-alive: the idle timeout again

    def _framing(self) -> tuple[bool, int | None]:
        """(chunked, Content-Length or None) of the request; HttpError for framing that cannot be trusted.

        A length is digits only (int() would take "1_0", "+10" or " 10 "), several Content-Length
        values must agree, and chunked is the only transfer coding: anything looser lets a proxy in front
        and the collector disagree on where a request ends.
        """
        codings = [
            coding.strip().lower()
            for value in self.headers.get_all("Transfer-Encoding") or []
            for coding in value.split(",")
            if coding.strip()
        ]
        declared = self.headers.get_all("Content-Length") or []
        lengths = {part.strip() for value in declared for part in value.split(",")}
        if codings:
            if codings != ["chunked"]:
                unsupported = ", ".join(codings)[:80]
                message = f"unsupported Transfer-Encoding {unsupported!r}; use chunked"
                raise HttpError(501, rx.UNIMPLEMENTED, message)
            if lengths:
                raise HttpError(400, rx.INVALID_ARGUMENT, "both Transfer-Encoding and Content-Length")
            return True, None
        if not lengths:
            return False, None
        if len(lengths) > 1:
            raise HttpError(400, rx.INVALID_ARGUMENT, "conflicting Content-Length values")
        [length] = lengths
        if not _DIGITS.fullmatch(length):
            raise HttpError(400, rx.INVALID_ARGUMENT, f"malformed Content-Length {length[:40]!r}")
        return False, int(length)

    def _version_supported(self) -> bool:
        """HTTP/1.0 and 1.1 only; the standard library also lets "HTTP/0.9" (and no version) through, and
        answers those without a status line, which no OTLP client can read."""
        if self.request_version in ("HTTP/1.0", "HTTP/1.1"):
            return True
        version = self.request_version[:20]
        self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"unsupported HTTP version {version!r}")
        return False

    def _refuse_method(self) -> None:
        if not self._version_supported():
            return
        self._deadline = time.monotonic() + self.server.receiver.read_timeout_s
        try:
            chunked, length = self._framing()
            self._unread = -1 if chunked else length or 0
        except HttpError:
            self._unread = -1
        path = self.path.split("?", 1)[0]
        if path == TRACES_PATH or path in OTHER_SIGNALS:
            self._send_error(HttpError(405, rx.UNIMPLEMENTED, f"{self.command} is not allowed; use POST"))
        else:
            self._send_error(HttpError(404, rx.UNIMPLEMENTED, f"no such endpoint: {path}"))

    do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def do_HEAD(self) -> None:
        self._refuse_method()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (a malformed request line, too many or too long headers, a
        method no do_* handles) answered like every other error: a google.rpc.Status, not an HTML page.
        A method the server does not know is a 405 with Allow, as for the methods it knows."""
        self._unread = -1  # the request was not understood: nothing says where it ends
        if getattr(self, "request_version", None) not in ("HTTP/1.0", "HTTP/1.1"):
            self.request_version = self.protocol_version  # answer with a status line and headers, always
        command = getattr(self, "command", None)
        if code == HTTPStatus.NOT_IMPLEMENTED and command and not hasattr(self, "do_" + command):
            self._send_error(HttpError(405, rx.UNIMPLEMENTED, f"{command[:40]} is not allowed; use POST"))
            return
        rpc_code = rx.UNIMPLEMENTED if code == HTTPStatus.NOT_IMPLEMENTED else rx.INVALID_ARGUMENT
        self._send_error(HttpError(code, rpc_code, message or HTTPStatus(code).phrase))

    # --- POST -----------------------------------------------------------------------------------

    def _post(self, chunked: bool, length: int | None) -> None:
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
            receiver.budget.admit()
            with receiver.budget.hold() as reservation:
                body = self._read_body(reservation, receiver.max_request_bytes, chunked, length)
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
        except ConnectionError:  # the client went away mid-request: no one to answer
            receiver.stats.count("disconnected")
            self.close_connection = True
            return
        except Exception as exc:  # noqa: BLE001 - a bug must cost one request, not the connection thread
            receiver.stats.count("500")
            traceback.print_exc(file=sys.stderr)
            self.close_connection = True
            self._send_error(HttpError(500, rx.INTERNAL, f"internal error: {exc!r}"))
            return
        self._send(200, response, json=json)

    def _media_type(self) -> str:
        headers = getattr(self, "headers", None)  # unset when the request line itself was refused
        return ((headers and headers.get("Content-Type")) or "").split(";", 1)[0].strip().lower()

    def _is_json(self) -> bool:
        return self._media_type() == JSON_TYPE

    def _read_body(self, reservation: Reservation, limit: int, chunked: bool, length: int | None) -> bytes:
        """The request body, decompressed, at most `limit` bytes (413 past it).

        Memory is reserved from the in-flight budget as bytes actually arrive (and as they inflate), never
        from what a header announces: a client announcing 64 MiB and sending a byte a second holds a
        byte, not the budget. The whole body must arrive before the read deadline (408 after it).
        """
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding not in ("identity", "gzip", "x-gzip"):
            self.close_connection = True
            raise HttpError(415, rx.INVALID_ARGUMENT, f"unsupported Content-Encoding {encoding!r}; use gzip")
        if chunked:
            pieces = self._chunked_pieces(limit)
        else:
            if length is None:
                self.close_connection = True
                raise HttpError(411, rx.INVALID_ARGUMENT, "Content-Length is required")
            if length > limit:
                self._drain(length)
                raise HttpError(413, rx.RESOURCE_EXHAUSTED, f"request of {length} bytes exceeds {limit}")
            pieces = self._pieces(length)
        if encoding == "identity":
            return self._collect(pieces, reservation, limit)
        return self._gunzip(pieces, reservation, limit)

    # --- reading against the deadline -----------------------------------------------------------

    def _read_some(self, n: int) -> bytes:
        """Up to `n` bytes of the body as soon as any arrive (b"" at the end of the stream); 408 past the
        request's deadline, however slowly the bytes trickle in."""
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            self._timed_out()
        self.connection.settimeout(remaining)
        try:
            return self.rfile.read1(n)
        except TimeoutError:
            self._timed_out()

    def _read_line(self, limit: int = 1024) -> bytes:
        """One line of a chunked body (a chunk size, its CRLF, a trailer), against the deadline too."""
        try:
            rfile = cast(io.BufferedReader, self.rfile)
            line = read_line_by(rfile, self.connection, self._deadline, limit + 1)
        except TimeoutError:
            self._timed_out()
        if not line.endswith(b"\n"):
            self.close_connection = True
            if len(line) > limit:
                raise HttpError(400, rx.INVALID_ARGUMENT, "malformed chunked body: a line too long")
            raise HttpError(400, rx.INVALID_ARGUMENT, "the body ended inside a chunk")
        return line

    def _timed_out(self) -> NoReturn:
        self._unread = -1  # the rest is not read: the connection closes after the answer
        timeout = self.server.receiver.read_timeout_s
        raise HttpError(408, rx.DEADLINE_EXCEEDED, f"the request did not arrive within {timeout:g} s")

    def _pieces(self, length: int) -> Iterator[bytes]:
        remaining = length
        while remaining > 0:
            piece = self._read_some(min(READ_PIECE, remaining))
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
            size_text = self._read_line().split(b";", 1)[0].strip(b" \t\r\n")
            if not _HEX.fullmatch(size_text):
                self.close_connection = True
                raise HttpError(400, rx.INVALID_ARGUMENT, "malformed chunked body: a chunk size is not hex")
            size = int(size_text, 16)
            if size == 0:
                for _ in range(MAX_TRAILERS):
                    if not self._read_line().strip():
                        self._unread = 0
                        return
                self.close_connection = True
                raise HttpError(400, rx.INVALID_ARGUMENT, "malformed chunked body: too many trailers")
            total += size
            if total > limit * 2:  # compressed bodies only shrink... unless hostile; stop reading
                self.close_connection = True
                raise HttpError(413, rx.RESOURCE_EXHAUSTED, f"request exceeds {limit} bytes")
            remaining = size
            while remaining > 0:
                piece = self._read_some(min(READ_PIECE, remaining))
                if not piece:
                    self.close_connection = True
                    raise HttpError(400, rx.INVALID_ARGUMENT, "the body ended inside a chunk")
                remaining -= len(piece)
                yield piece
            if self._read_line(2).rstrip(b"\r\n"):
                self.close_connection = True
                raise HttpError(400, rx.INVALID_ARGUMENT, "malformed chunked body: no CRLF after a chunk")

    def _collect(self, pieces: Iterator[bytes], reservation: Reservation, limit: int) -> bytes:
        body = bytearray()
        for piece in pieces:
            body += piece
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
        """Reads and discards the rest of a refused body so the client sees the answer, not a reset;
        a body too large, or too slow to arrive before the deadline, closes the connection instead."""
        if n > DRAIN_LIMIT:
            self.close_connection = True
            return
        try:
            while n > 0:
                piece = self._read_some(min(READ_PIECE, n))
                if not piece:
                    break
                n -= len(piece)
        except HttpError:
            self.close_connection = True
            return
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
