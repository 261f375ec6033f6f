"""The collector's settings in one object, with one precedence: defaults < environment < command-line flags.

Every setting has an environment variable (TURNLENS_<NAME>) and a flag of the same name; the table
below is also what `turnlens collect --help` and docs/collector.md show.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from turnlens.kernel.durations import parse_seconds

MIB = 1024 * 1024
_UNITS = {  # DuckDB's size units, upper-cased: KB is 1000 bytes, KiB 1024
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B)", re.IGNORECASE)


@dataclass(frozen=True)
class CollectorSettings:
    """Where the collector listens, what it accepts and where it stores."""

    store: Path = Path("turnlens-data")
    http: str = "127.0.0.1:4318"  # "off" disables the OTLP/HTTP receiver
    grpc: str = "127.0.0.1:4317"  # "off" disables the OTLP/gRPC receiver
    token: str | None = None  # when set, every request needs `Authorization: Bearer <token>`
    max_request_bytes: int = 64 * MIB  # one request, after decompression; larger ones get 413
    max_inflight_bytes: int = 128 * MIB  # request bodies being decoded at once; past it, 429
    retention: str | None = None  # e.g. 30d: drop the days of data received longer ago than this
    compact_interval: str = "5m"  # how often the collector compacts small segments
    grace: str = "5m"  # how long replaced files stay for readers outside turnlens (an analyst's own DuckDB)
    materialize_interval: str = "1s"  # how often a refresh of the per-turn views starts; "off" never
    materialize_margin: str = "0s"  # a refresh's watermark is this long before it starts
    materialize_threads: str = "auto"  # DuckDB threads of a refresh: a number, or auto (the cores left idle)
    materialize_memory_limit: str = "1GB"  # DuckDB's memory limit in the materialiser; past it, it spills
    materialize_spill_dir: str | None = None  # where it spills: a local disk's folder; unset, the store's own
    materialize_log: str | None = None  # a file each refresh appends its JSON summary to; unset, none kept
    shutdown_grace: str = "10s"  # on SIGTERM, how long in-flight requests may take to finish
    read_timeout: str = "30s"  # a request's body must have arrived this long after its headers; else 408
    header_timeout: str = "10s"  # a request's line and headers must have arrived this long after it began
    max_grpc_connections: int = 256  # OTLP/gRPC connections open at once; more are closed as they come

    @property
    def retention_s(self) -> float | None:
        return parse_seconds(self.retention) if self.retention else None

    @property
    def grace_s(self) -> float:
        return parse_seconds(self.grace)

    @property
    def compact_interval_s(self) -> float:
        return parse_seconds(self.compact_interval)

    @property
    def materialize_interval_s(self) -> float | None:
        if self.materialize_interval.strip().lower() in ("off", "0", "none", "no"):
            return None
        return parse_seconds(self.materialize_interval)

    @property
    def materialize_margin_s(self) -> float:
        return parse_seconds(self.materialize_margin)

    @property
    def materialize_log_file(self) -> Path | None:
        """--materialize-log as a path; None when unset."""
        return Path(self.materialize_log) if self.materialize_log else None

    @property
    def materialize_thread_count(self) -> int | None:
        """--materialize-threads as a number; None for auto."""
        text = self.materialize_threads.strip().lower()
        if text == "auto":
            return None
        if not text.isdigit() or int(text) < 1:
            raise ValueError(
                f"--materialize-threads is a number of threads or auto, not {self.materialize_threads!r}"
            )
        return int(text)

    @property
    def materialize_memory_bytes(self) -> int:
        """--materialize-memory-limit in bytes (DuckDB's units: 512MB, 2GB, 1.5GiB)."""
        found = _SIZE.fullmatch(self.materialize_memory_limit.strip())
        if found is None:
            raise ValueError(
                "--materialize-memory-limit is a size such as 512MB or 2GB,"
                f" not {self.materialize_memory_limit!r}"
            )
        return int(float(found[1]) * _UNITS[found[2].upper()])

    @property
    def shutdown_grace_s(self) -> float:
        return parse_seconds(self.shutdown_grace)

    @property
    def read_timeout_s(self) -> float:
        return parse_seconds(self.read_timeout)

    @property
    def header_timeout_s(self) -> float:
        return parse_seconds(self.header_timeout)


HELP = {
    "store": "store directory (segments and the DuckDB catalog)",
    "http": "OTLP/HTTP listen address HOST:PORT, or 'off'",
    "grpc": "OTLP/gRPC listen address HOST:PORT, or 'off'",
    "token": "require 'Authorization: Bearer TOKEN' on every request",
    "max_request_bytes": "largest request accepted, in bytes after decompression (413 / RESOURCE_EXHAUSTED)",
    "max_inflight_bytes": "bytes of requests decoded at once before answering 429 / UNAVAILABLE",
    "retention": "drop data received longer ago than this (e.g. 30d); unset keeps everything",
    "compact_interval": "how often small segments are merged (e.g. 5m)",
    "grace": "how long replaced segments and snapshots stay on disk for readers outside turnlens (e.g. 5m)",
    "materialize_interval": "how often a refresh of the per-turn views starts (e.g. 1s; half of it after a"
    " longer one), or 'off'",
    "materialize_margin": "a refresh's watermark is this long before it starts; the next takes the spans"
    " received since again (e.g. 1s; 0s by default)",
    "materialize_threads": "DuckDB threads of each refresh: a number, or 'auto' (one per core the host leaves"
    " idle)",
    "materialize_memory_limit": "DuckDB's memory limit in the materialiser (e.g. 1GB); past it, it spills to"
    " disk",
    "materialize_spill_dir": "where the materialiser's DuckDB spills: a folder on a local disk, for a store"
    " on a network filesystem or in a bucket (default: the store's derived/.spill)",
    "materialize_log": "a file the materialiser appends one JSON line to per refresh (what it took: copies,"
    " seconds and CPU per step, as `turnlens materialize --json` prints it); unset, none is kept",
    "shutdown_grace": "on SIGTERM, how long in-flight requests may take before the store is flushed",
    "read_timeout": "how long a request body may take to arrive after its headers (e.g. 30s); slower: 408",
    "header_timeout": "how long a request's line and headers may take to arrive (e.g. 10s); slower: 408",
    "max_grpc_connections": "OTLP/gRPC connections open at once; more are closed as accepted (UNAVAILABLE)",
}


def env_name(name: str) -> str:
    return f"TURNLENS_{name.upper()}"


def _convert(name: str, text: str) -> Any:
    default = CollectorSettings.__dataclass_fields__[name].default
    if name == "store":
        return Path(text)
    if isinstance(default, int):
        return int(text)
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting; its default is None so the environment and the defaults show through."""
    for f in fields(CollectorSettings):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.name != "token" else "unset"
        parser.add_argument(
            flag,
            dest=f.name,
            default=None,
            metavar=f.name.upper().split("_")[-1] if f.name != "store" else "DIR",
            help=f"{HELP[f.name]} (env {env_name(f.name)}; default {default})",
        )


def resolve(
    args: argparse.Namespace | None = None, environ: Mapping[str, str] | None = None
) -> CollectorSettings:
    """Defaults, overridden by TURNLENS_* environment variables, overridden by flags."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in fields(CollectorSettings):
        text = environ.get(env_name(f.name))
        flag = getattr(args, f.name, None) if args is not None else None
        if flag is not None:
            text = flag
        if text is not None and text != "":
            values[f.name] = _convert(f.name, str(text))
    settings = replace(CollectorSettings(), **values)
    if settings.token is not None and not is_token(settings.token):
        raise ValueError(
            "--token must be visible ASCII characters only (no spaces, no letters outside ASCII): "
            "HTTP headers and gRPC metadata cannot carry anything else"
        )
    for name in (
        "retention_s",
        "grace_s",
        "compact_interval_s",
        "materialize_interval_s",
        "materialize_margin_s",
        "shutdown_grace_s",
        "read_timeout_s",
        "header_timeout_s",
        "materialize_thread_count",
        "materialize_memory_bytes",
    ):
        getattr(settings, name)  # a malformed duration, count or size fails here, at start-up
    return settings


def is_token(text: str) -> bool:
    """True for a usable bearer token: visible ASCII, no spaces (what an Authorization header carries)."""
    return bool(text) and all("!" <= c <= "~" for c in text)


def parse_address(text: str) -> tuple[str, int] | None:
    """HOST:PORT (IPv6 as [::1]:4318) → (host, port); 'off' → None."""
    if text.strip().lower() in ("off", "none", "no", "0"):
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"not a HOST:PORT address: {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)
