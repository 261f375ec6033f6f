"""A store on S3-compatible object storage through JuiceFS, its metadata in Redis as in production, shared by
two machines (bench/objectstore.py): collectors on both and two materialisers, killed with -9 while the
OpenTelemetry SDK's exporters send, lose no acknowledged span, leave a derived state equal to a full build's,
and every byte of the store lies in the bucket; meanwhile readers on a third machine, whose mount keeps
JuiceFS's default metadata caches (a host that only reads), never fail a read."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import benchscripts
import lease_procs
import otlp_samples as s
import pytest
from fleet import (
    Materializer,
    Sender,
    assert_acknowledged_stored,
    assert_state_is_a_full_builds,
    published_after,
    settle,
    start_in_background,
    stop_fleet,
    wait_for,
)

objectstore = benchscripts.load("objectstore")

# the machines are mount namespaces with a FUSE mount each: they need root's privileges and /dev/fuse (which
# `make test` has here); a machine without them cannot run these tests at all
_CANNOT_MOUNT = objectstore.cannot_mount()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(_CANNOT_MOUNT is not None, reason=f"cannot mount JuiceFS here: {_CANNOT_MOUNT}"),
]

COMMON = ("--compact-interval", "3s", "--grace", "0s", "--materialize-margin", "0")
SPANS_PER_SENDER = 300
# the reader-lease test's readers, each kind a process reading once a second
READERS = lease_procs.__file__
READER_KINDS = ("divergences", "turn", "dashboard")

HOLD_LOCK = """
import fcntl, sys, time
with open(sys.argv[1], "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(60)
"""
TRY_LOCK = """
import fcntl, sys
with open(sys.argv[1], "w") as f:
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(3)
"""


@pytest.fixture(scope="module")
def volume(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    workdir = tmp_path_factory.mktemp("objectstore")
    with objectstore.shared_volume(workdir, machines=2, meta="redis", readers=1) as shared:
        yield shared


def test_a_lock_taken_on_one_machine_excludes_the_other_until_its_holder_dies(
    volume: Any,
) -> None:
    first, second = volume.machines
    path = volume.mountpoint / "lock-check"
    holder = subprocess.Popen(
        [*first.prefix, sys.executable, "-c", HOLD_LOCK, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        taken = subprocess.run([*second.prefix, sys.executable, "-c", TRY_LOCK, str(path)], timeout=30)
        assert taken.returncode == 3, "the second machine took a lock the first one holds"
    finally:
        holder.kill()  # a holder that dies releases its lock
        holder.wait(10)
    deadline = time.monotonic() + 30
    while subprocess.run([*second.prefix, sys.executable, "-c", TRY_LOCK, str(path)], timeout=30).returncode:
        assert time.monotonic() < deadline, "the lock of a dead holder was never released"
        time.sleep(0.2)


def start_readers(volume: Any, store: Path, stop: Path) -> dict[str, subprocess.Popen[str]]:
    """The readers, on the machine whose mount caches metadata, once each has found a turn to read."""
    readers = {
        kind: subprocess.Popen(
            [*volume.readers[0].prefix, sys.executable, READERS, "reader", kind, "--store", str(store),
             "--stop-file", str(stop)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind in READER_KINDS
    }
    for kind, reader in readers.items():
        assert reader.stdout is not None
        line = reader.stdout.readline()
        error = reader.stderr.read() if reader.stderr and not line.strip() else ""
        assert line.strip() == "ready", f"{kind} reader: {line}{error}"
    return readers


def test_two_machines_on_a_store_in_a_bucket_killed_at_random_lose_nothing(
    volume: Any, tmp_path: Path
) -> None:
    first, second = volume.machines
    store = volume.mountpoint / "store"
    # each machine's materialiser spills to its own local disk, not into the bucket
    spill = ("--materialize-spill-dir", str(volume.mountpoint.parent / "local-spill"))
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    # machine 1: a collector with its own materialiser; 2: a collector and `turnlens materialize --every`
    collectors = [
        s.CollectorProcess(store, *COMMON, *spill, "--materialize-interval", "1s", prefix=first.prefix),
        s.CollectorProcess(store, *COMMON, *spill, "--materialize-interval", "off", prefix=second.prefix),
    ]
    starting = [start_in_background(collector) for collector in collectors]
    for thread in starting:
        thread.join()
    materializer = Materializer(store, prefix=second.prefix)
    materializer.start()
    endpoints = [f"http://{c.http}/v1/traces" for c in collectors]
    senders = [Sender(endpoints, first, SPANS_PER_SENDER) for first in range(2)]
    victims = ["collector 0", "collector 1", "materializer"]
    rng.shuffle(victims)
    started = time.monotonic()
    stop = tmp_path / "stop-readers"
    readers: dict[str, subprocess.Popen[str]] = {}
    try:
        wait_for(lambda: published_after(store, 0), "a first whole version of the derived state")
        wait_for(lambda: s.query(store, "select count(*) from turns")[0][0] > 0, "a turn for the readers")
        readers = start_readers(volume, store, stop)
        for victim in victims:
            time.sleep(rng.uniform(0.5, 2.0))
            if victim == "materializer":
                materializer.kill()
                materializer.start()
            else:
                collector = collectors[int(victim.split()[1])]
                collector.kill()  # SIGKILL
                starting.append(start_in_background(collector))
        settle(store, starting)
    finally:
        stop.touch()
        read = {kind: reader.communicate(timeout=120)[0] for kind, reader in readers.items()}
        exits = stop_fleet(senders, collectors, materializer)
    what = f"seed {seed}, kills {victims} in {time.monotonic() - started:.0f} s"
    assert exits == [0, 0], f"{what}\n" + "\n".join(collectors[0].lines[-20:])
    for kind, out in read.items():  # every read of every reader succeeded, and they read while files moved
        ok, failures = lease_procs.reads_of(out)
        assert failures == [], f"{kind} reader on a cached mount, {what}: {failures[:3]}"
        assert ok >= 2, f"the {kind} reader read too little to tell, {what}: {out[-500:]}"

    acknowledged = assert_acknowledged_stored(store, senders, what)
    assert len(acknowledged) >= 2 * SPANS_PER_SENDER, what
    full = assert_state_is_a_full_builds(store, what)
    assert len(full["turns"]) > 10, what

    # the store's bytes are objects in the bucket, not files on this machine's disk
    store_bytes = sum(path.stat().st_size for path in store.rglob("*") if path.is_file())
    assert store_bytes > 0
    assert volume.server.stored()[0] >= store_bytes, what
    print(f"{len(acknowledged)} spans acknowledged, {store_bytes} bytes stored; {what}", file=sys.stderr)
