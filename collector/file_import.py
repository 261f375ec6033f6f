"""`turnlens ingest`: OTLP JSON files into the store, as the OpenTelemetry Collector's file exporter
writes them.

A file is either JSON Lines (one ExportTraceServiceRequest per line, the file exporter's format) or
one OTLP JSON request, possibly pretty-printed; either may be gzip-compressed. Lines that are not
OTLP are counted with their line numbers rather than stopping the import.
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import orjson
import pyarrow as pa
from tqdm import tqdm
from turnlens.collector.otlp_decode import OtlpDecodeError, decode_json_document
from turnlens.collector.store import Store

APPEND_ROWS = 20_000  # rows gathered before one (durable) append
MAX_REPORTED_LINES = 5


@dataclass
class IngestReport:
    """What an import stored and what it could not, and why."""

    files: int = 0
    requests: int = 0
    stored: int = 0
    rejected: int = 0
    reasons: Counter[str] = field(default_factory=Counter)  # rejected spans by reason
    problems: list[str] = field(default_factory=list)  # unreadable lines / files
    problem_count: int = 0

    def problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_REPORTED_LINES:
            self.problems.append(text)

    def summary(self) -> str:
        lines = [
            f"turnlens ingest: {self.files} file(s), {self.requests} request(s): "
            f"{self.stored} spans stored, {self.rejected} rejected"
        ]
        lines += [f"  rejected {count} × {reason}" for reason, count in self.reasons.most_common()]
        if self.problem_count:
            lines.append(f"  {self.problem_count} unreadable request(s) skipped:")
            lines += [f"    {text}" for text in self.problems]
            if self.problem_count > len(self.problems):
                lines.append(f"    … and {self.problem_count - len(self.problems)} more")
        return "\n".join(lines)


def _documents(path: Path, report: IngestReport, bar: tqdm) -> Iterator[object]:
    """The JSON documents of one file: one per line, or the whole file when it is one request."""
    with path.open("rb") as raw:
        compressed = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream: IO[bytes] | gzip.GzipFile = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
        position = 0

        def advance() -> None:
            nonlocal position
            now = raw.tell()
            bar.update(now - position)
            position = now

        first = stream.readline()
        try:
            documents = [orjson.loads(first)] if first.strip() else []
        except orjson.JSONDecodeError:
            if first.lstrip().startswith(b"{"):  # a pretty-printed single request
                body = first + stream.read()
                advance()
                try:
                    yield orjson.loads(body)
                except orjson.JSONDecodeError as exc:
                    report.problem(f"{path}: not JSON: {exc}")
                return
            documents = []
            report.problem(f"{path}:1: not JSON")
        yield from documents
        for line_number, line in enumerate(stream, start=2):
            advance()
            if not line.strip():
                continue
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                report.problem(f"{path}:{line_number}: not JSON: {exc}")
        advance()


def ingest_files(store: Store, paths: list[Path], *, progress: bool = True) -> IngestReport:
    """Imports every file; appends in batches of about APPEND_ROWS rows, each durable when appended."""
    report = IngestReport()
    pending: list[pa.Table] = []
    pending_rows = 0
    total = sum(path.stat().st_size for path in paths)
    with tqdm(total=total, unit="B", unit_scale=True, disable=not progress, desc="ingest") as bar:
        for path in paths:
            report.files += 1
            for document in _documents(path, report, bar):
                report.requests += 1
                try:
                    result = decode_json_document(document)
                except OtlpDecodeError as exc:
                    report.problem(f"{path}: request {report.requests}: {exc}")
                    continue
                report.rejected += result.rejected
                report.reasons.update(result.reasons)
                if result.table.num_rows:
                    pending.append(result.table)
                    pending_rows += result.table.num_rows
                if pending_rows >= APPEND_ROWS:
                    store.append(pa.concat_tables(pending))
                    report.stored += pending_rows
                    pending, pending_rows = [], 0
                bar.set_postfix(stored=report.stored + pending_rows, rejected=report.rejected, refresh=False)
        if pending:
            store.append(pa.concat_tables(pending))
            report.stored += pending_rows
    return report
