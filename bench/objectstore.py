"""A store on S3-compatible object storage, as docs/operating-at-scale.md sets it up, on this one machine.

- The object store: moto's S3 server in a process of its own on 127.0.0.1 (S3's HTTP API, objects in memory).
- The filesystem: a JuiceFS volume on a bucket of it, its metadata in a Redis server of its own on 127.0.0.1
  (`--meta redis`, as a fleet's machines share it in production) or in a SQLite file (`--meta sqlite`, the
  script's default: one host only).
- The machines: each is a mount namespace of its own (`unshare --mount`) in which a JuiceFS client of its
  own mounts the volume at the same path, as every machine of a fleet mounts it at the same path. A process
  runs on a machine under `nsenter` (`Machine.prefix`). This process mounts a client of its own there too.

tests/collector/test_object_storage.py runs a fleet on it. As a script it mounts the volume (no other machine)
and runs a command with `{mnt}` replaced by the mount point, then unmounts: a benchmark on object storage,

    .venv/bin/python bench/objectstore.py -- .venv/bin/python bench/ingest.py --store {mnt}/store --seconds 10

prints the command's output, then one JSON line: the bytes in the bucket, the objects' count, and the CPU
seconds the S3 server, the JuiceFS client and the metadata server (Redis) used meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import psutil

BIN = Path(sys.executable).parent
JUICEFS = BIN / "juicefs"
BUCKET = "turnlens"
VOLUME = "turnlens"
KEYS = ("test-key", "test-secret")
METADATA = ("sqlite", "redis")  # where the volume's metadata is kept (shared_volume's `meta`)
# what the store's commits need of the filesystem (docs/operating-at-scale.md): a file renamed or deleted by
# one client is seen at once by every other, so no metadata is cached in the kernel; each client its own cache
NO_KERNEL_CACHE = (
    "--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0", "--negative-entry-cache", "0",
)
CLIENT_OPTIONS = ("--backup-meta", "0", "--no-usage-report", "--no-syslog")
MOUNT_OPTIONS = (*NO_KERNEL_CACHE, *CLIENT_OPTIONS)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cannot_mount() -> str | None:
    """Why this machine cannot mount FUSE filesystems in a mount namespace of their own; None if it can."""
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse"
    try:
        subprocess.run(["unshare", "--mount", "true"], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"no mount namespace (`unshare --mount` needs CAP_SYS_ADMIN): {exc}"
    return None


class S3Server:
    """moto's S3 server, a process of its own listening on 127.0.0.1."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.endpoint, timeout=1).close()
                break
            except OSError:
                assert self.proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, f"moto's S3 server did not answer: {log.read_text()}"
                time.sleep(0.2)
        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEYS[0],
            aws_secret_access_key=KEYS[1],
            region_name="us-east-1",
        )
        self.client.create_bucket(Bucket=BUCKET)

    def stored(self) -> tuple[int, int]:
        """The bytes of every object in the bucket, and their count."""
        total = count = 0
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
            total += sum(item["Size"] for item in page.get("Contents", []))
            count += len(page.get("Contents", []))
        return total, count

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self._log.close()


class RedisServer:
    """Debian's Redis server (scripts/install-redis.sh), a process of its own on 127.0.0.1 keeping a volume's
    metadata in memory only: the volume lives as long as the process."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        assert binary, "no redis-server: `make redis` installs Debian's"
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/1"
        log = workdir / "redis.log"
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(workdir)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while not self.answers():
            assert self.proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"Redis did not answer: {log.read_text()}"
            time.sleep(0.1)

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self._log.close()


class Machine:
    """A mount namespace of its own, kept by a sleeping process, standing for another machine."""

    def __init__(self) -> None:
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sleep", "infinity"]
        )

    @property
    def prefix(self) -> tuple[str, ...]:
        """What a command is run under to run on this machine."""
        return ("nsenter", "-t", str(self.holder.pid), "-m", "--")

    def mounts(self) -> str:
        return Path(f"/proc/{self.holder.pid}/mounts").read_text()

    def stop(self) -> None:
        self.holder.kill()
        self.holder.wait(10)


class Client:
    """A JuiceFS client mounting the volume at `mountpoint` on `machine` (None: the test process's own), in
    the foreground of a process this object owns."""

    def __init__(
        self, meta: str, mountpoint: Path, workdir: Path, machine: Machine | None, kernel_cache: bool = False
    ) -> None:
        self.mountpoint = mountpoint
        self.machine = machine
        prefix = machine.prefix if machine else ()
        workdir.mkdir(parents=True)
        self._log = (workdir / "mount.log").open("wb")
        self.proc = subprocess.Popen(
            [*prefix, str(JUICEFS), "mount", meta, str(mountpoint),
             *(CLIENT_OPTIONS if kernel_cache else MOUNT_OPTIONS),
             "--cache-dir", str(workdir / "cache")],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while not self.mounted():
            assert self.proc.poll() is None, (workdir / "mount.log").read_text()
            assert time.monotonic() < deadline, f"no JuiceFS mount: {(workdir / 'mount.log').read_text()}"
            time.sleep(0.1)

    def mounted(self) -> bool:
        mounts = self.machine.mounts() if self.machine else Path("/proc/self/mounts").read_text()
        return any(
            line.split()[1] == str(self.mountpoint) and "juicefs" in line.split()[2]
            for line in mounts.splitlines()
        )

    def stop(self) -> None:
        """Unmounts: the client unmounts on SIGINT; a lazy unmount if it did not."""
        self.proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(20)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.mounted():
            prefix = self.machine.prefix if self.machine else ()
            subprocess.run([*prefix, "umount", "-l", str(self.mountpoint)], check=False)
        self._log.close()


@dataclass
class Volume:
    """What shared_volume set up: the S3 server, the path every client mounts the volume at, the machines and
    every client (this process's last)."""

    server: S3Server
    mountpoint: Path
    machines: list[Machine]
    clients: list[Client] = field(default_factory=list)
    redis: RedisServer | None = None
    readers: list[Machine] = field(default_factory=list)  # machines mounting with the kernel caches on

    def cpu_s(self) -> dict[str, float]:
        """CPU seconds (user + system) so far of the S3 server and of the JuiceFS clients (and children)."""

        def cpu(pid: int) -> float:
            process = psutil.Process(pid)
            total = 0.0
            for each in (process, *process.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    times = each.cpu_times()
                    total += times.user + times.system
            return total

        return {
            "s3_server": round(cpu(self.server.proc.pid), 1),
            "juicefs_clients": round(sum(cpu(client.proc.pid) for client in self.clients), 1),
            "metadata_server": round(cpu(self.redis.proc.pid), 1) if self.redis else 0.0,
        }


@contextlib.contextmanager
def shared_volume(
    workdir: Path, machines: int, meta: str = "sqlite", kernel_cache: bool = False, readers: int = 0
) -> Iterator[Volume]:
    """An S3 server, a JuiceFS volume on it with its metadata in `meta` (METADATA), and `machines` machines,
    `readers` more machines, and this process each mounting it at the same path. The machines' clients cache
    no metadata in the kernel (what a writer needs); the readers' keep JuiceFS's default one-second caches (a
    host that only reads), and so does this process's with `kernel_cache`."""
    assert meta in METADATA, meta
    server = S3Server(workdir / "s3.log")
    stack = contextlib.ExitStack()
    stack.callback(server.stop)
    redis = None
    try:
        if meta == "redis":
            redis = RedisServer(workdir)
            stack.callback(redis.stop)  # after every client unmounted (the stack unwinds backwards)
            meta_url = redis.url
        else:
            meta_url = f"sqlite3://{workdir / 'meta.db'}"
        formatted = subprocess.run(
            [str(JUICEFS), "format", "--storage", "s3", "--bucket", f"{server.endpoint}/{BUCKET}",
             "--access-key", KEYS[0], "--secret-key", KEYS[1], "--trash-days", "0", meta_url, VOLUME],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert formatted.returncode == 0, formatted.stderr
        volume = Volume(
            server,
            workdir / "mnt",
            [Machine() for _ in range(machines)],
            redis=redis,
            readers=[Machine() for _ in range(readers)],
        )
        volume.mountpoint.mkdir()
        # the namespaces first (above): one made after this process's mount would start with it
        for host in (*volume.machines, *volume.readers):
            stack.callback(host.stop)
        for number, host in enumerate([*volume.machines, *volume.readers, None]):
            name = f"client-{number}" if host else "client-here"
            cached = host in volume.readers if host else kernel_cache
            volume.clients.append(Client(meta_url, volume.mountpoint, workdir / name, host, cached))
            stack.callback(volume.clients[-1].stop)
        yield volume
    finally:
        stack.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--meta", choices=METADATA, default="sqlite", help="where the volume's metadata is kept"
    )
    parser.add_argument(
        "--kernel-cache", action="store_true",
        help="mount with JuiceFS's default one-second metadata caches (a reader's mount; not for writers)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --; {mnt}: the mount")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unmount and stop the S3 server on the way out
    with tempfile.TemporaryDirectory(prefix="turnlens-objectstore-") as workdir:
        volume_at = shared_volume(Path(workdir), machines=0, meta=args.meta, kernel_cache=args.kernel_cache)
        with volume_at as volume:
            started = time.monotonic()
            code = subprocess.call([part.replace("{mnt}", str(volume.mountpoint)) for part in command])
            seconds = time.monotonic() - started
            stored, objects = volume.server.stored()
            cpu = volume.cpu_s()
    summary = {
        "exit_code": code, "seconds": round(seconds, 1), "bucket_bytes": stored, "objects": objects,
        "s3_server_cpu_s": cpu["s3_server"], "juicefs_clients_cpu_s": cpu["juicefs_clients"],
        "metadata_server_cpu_s": cpu["metadata_server"], "meta": args.meta,
    }
    print(json.dumps(summary))
    return code


if __name__ == "__main__":
    sys.exit(main())
