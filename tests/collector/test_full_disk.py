"""A full disk under a real `turnlens collect`: a small tmpfs holds the store. While it is full the collector
answers 503 with Retry-After and gRPC UNAVAILABLE (OTLP's retryable answers), stays up, loses nothing it
acknowledged, leaves no half-written segment, and takes spans again once space returns."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import otlp_samples as s
import pytest

pytestmark = pytest.mark.slow

SIZE = "16m"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.fail("mounting the small tmpfs needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path, leave_bytes: int) -> Path:
    """A file taking all but `leave_bytes` of the disk's free space."""
    stat = os.statvfs(disk)
    free = stat.f_bavail * stat.f_frsize
    filler = disk / "filler"
    with open(filler, "wb") as handle:
        handle.write(b"\0" * max(free - leave_bytes, 0))
    return filler


def test_a_full_disk_gets_retryable_answers_and_loses_nothing(start_collector, small_disk: Path) -> None:  # noqa: ANN001
    store = small_disk / "store"
    collector = start_collector("--materialize-interval", "off", "--compact-interval", "1h", store=store)
    filler = _fill(small_disk, leave_bytes=256 * 1024)
    acknowledged: set[str] = set()
    answers: list[tuple[int, dict[str, str]]] = []
    for seed in range(1, 200):
        request = s.simple_request(300, seed=seed)
        status, headers, _ = s.post(
            collector.http, "/v1/traces", request.SerializeToString(), s.protobuf_headers()
        )
        answers.append((status, headers))
        if status == 200:
            acknowledged |= s.span_ids(request)
        if sum(1 for code, _ in answers if code == 503) >= 3:
            break
    refused = [(code, headers) for code, headers in answers if code != 200]
    assert acknowledged, "the disk filled before the first request"
    assert refused and all(code == 503 and "retry-after" in headers for code, headers in refused), refused
    assert collector.proc.poll() is None, "the collector died on a full disk"
    assert not [p for p in store.rglob("segments/*/*.parquet") if p.stat().st_size == 0]
    with grpc.insecure_channel(collector.grpc) as channel:  # gRPC answers the same, in its own words
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with pytest.raises(grpc.RpcError) as refused_grpc:
            export(s.simple_request(300, seed=5_000).SerializeToString(), timeout=30)
    assert refused_grpc.value.code() == grpc.StatusCode.UNAVAILABLE

    filler.unlink()  # space returns
    request = s.simple_request(300, seed=10_000)
    status, _, _ = s.post(collector.http, "/v1/traces", request.SerializeToString(), s.protobuf_headers())
    assert status == 200
    acknowledged |= s.span_ids(request)
    assert collector.stop() == 0, collector.output()

    rows = s.query(
        store, "select span_id from spans where span_id in (select unnest($1))", [sorted(acknowledged)]
    )
    assert {row[0] for row in rows} == acknowledged
    leftovers = [p.name for p in (store / "segments").rglob(".*.tmp")]
    assert leftovers == [], leftovers  # a failed write removes its temporary file
