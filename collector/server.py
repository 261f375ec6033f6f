"""The running collector: a store, its catalog, the OTLP receivers, and the order in which they stop.

Shutdown order matters for "nothing acknowledged is lost": stop accepting, let requests in progress
finish (each answers only after its rows are durable), then close the store, which writes what is
still buffered.
"""

from __future__ import annotations

import time

from turnlens.collector.grpc_receiver import GrpcReceiver
from turnlens.collector.http_receiver import HttpReceiver
from turnlens.collector.maintenance import MATERIALIZE_NICE, ChildLoop, ReplacedSweeper, run_child
from turnlens.collector.receiver import Receiver
from turnlens.collector.segments import segment_files
from turnlens.collector.settings import CollectorSettings, parse_address
from turnlens.collector.store import PrepareStore, Store


class Collector:
    """`turnlens collect` as an object, so tests and benchmarks can run it in-process too."""

    def __init__(self, settings: CollectorSettings, prepare_store: PrepareStore | None = None) -> None:
        self.settings = settings
        self.prepare_store = prepare_store
        self.http_address = parse_address(settings.http)
        self.grpc_address = parse_address(settings.grpc)
        self.store: Store | None = None
        self.receiver: Receiver | None = None
        self.http: HttpReceiver | None = None
        self.grpc: GrpcReceiver | None = None
        self.maintenance: list[ChildLoop | ReplacedSweeper] = []
        self.materialize_args: list[str] = []
        self.last_refresh = ""  # how the refresh at stop went, for the summary line
        self.held_spans = False  # the store had segments when this collector opened it
        self.stopped = False
        self.started_at = time.monotonic()

    def start(self) -> None:
        """Opens the store, prepares it for readers (`prepare_store`: the catalog of views), binds the
        listeners (OSError if an address is taken)."""
        settings = self.settings
        self.store = Store(settings.store)  # compaction runs in a child (ChildLoop below), not in here
        self.held_spans = next(segment_files(self.store.segments_root), None) is not None
        if self.prepare_store is not None:
            self.prepare_store(settings.store, self.store.segments_glob)
        self.receiver = Receiver(
            self.store,
            token=settings.token,
            max_request_bytes=settings.max_request_bytes,
            max_inflight_bytes=settings.max_inflight_bytes,
            read_timeout_s=settings.read_timeout_s,
            header_timeout_s=settings.header_timeout_s,
        )
        if self.http_address:
            self.http = HttpReceiver(*self.http_address, self.receiver)
        if self.grpc_address:
            self.grpc = GrpcReceiver(
                *self.grpc_address, self.receiver, max_connections=settings.max_grpc_connections
            )
        if self.http:
            self.http.start()
        if self.grpc:
            self.grpc.start()
        store = str(settings.store)
        retention = ["--retention", settings.retention] if settings.retention else []
        grace = ["--grace", str(settings.grace_s)]
        compact = ["compact", "--store", store, *retention, *grace]
        self.maintenance.append(ChildLoop("compact", compact, settings.compact_interval_s))
        if settings.materialize_interval_s is not None:
            # by default as many DuckDB threads as the host has idle cores, at least one: a refresh uses the
            # cores of a quiet host, and does not split its work (which costs CPU of its own) on a busy one
            threads = ["--threads", settings.materialize_threads.strip().lower()]
            memory = ["--memory-limit", settings.materialize_memory_limit.strip()]
            if settings.materialize_spill_dir:
                memory += ["--spill-dir", settings.materialize_spill_dir]
            log = settings.materialize_log_file
            output = "--json" if log is not None else "--quiet"  # one line per refresh, kept or not printed
            self.materialize_args = ["materialize", "--store", store, output, *threads, *memory, *grace]
            self.maintenance.append(
                ChildLoop(
                    "materialize",
                    [
                        *self.materialize_args,
                        "--margin",
                        str(settings.materialize_margin_s),
                        "--every",  # one long-lived child: no interpreter start per refresh
                        str(settings.materialize_interval_s),
                    ],
                    settings.materialize_interval_s,
                    nice=MATERIALIZE_NICE,
                    log=log,
                )
            )
        self.maintenance.append(ReplacedSweeper(settings.store))
        for loop in self.maintenance:
            loop.start()

    def describe(self) -> str:
        """The start-up line; tests and scripts wait for it."""
        parts = [f"store={self.settings.store}"]
        if self.http:
            parts.append("http=http://{}:{}/v1/traces".format(*self.http.address))
        if self.grpc:
            parts.append("grpc={}:{}".format(*self.grpc.address))
        if self.settings.token:
            parts.append("auth=bearer")
        return "turnlens collect: listening " + " ".join(parts)

    def stop(self) -> None:
        """Stop accepting, finish requests in progress, flush the store, bring the per-turn views up to the
        last span stored (`refresh_at_stop`). Safe to call twice."""
        if self.stopped:
            return
        self.stopped = True
        grace = self.settings.shutdown_grace_s
        for loop in self.maintenance:
            loop.stop()
        if self.http:
            self.http.stop_accepting()
        if self.grpc:
            self.grpc.stop(grace)
        if self.receiver:
            self.receiver.stopping.set()
        if self.http:
            self.http.wait_idle(grace)
        if self.store:
            self.store.close()
            self.refresh_at_stop()

    def refresh_at_stop(self) -> None:
        """One last refresh of the derived state, with no margin, once every span is durable: the materialiser
        runs a second or so behind the spans, so without it a stopped collector would leave the last turns it
        acknowledged out of the per-turn views until the next start. Bounded by the shutdown grace; a refresh
        cut short leaves the state it started from, which the next materialiser brings up to date.

        It runs when this collector stored spans, and also when the store held spans as it opened: a collector
        restarted after a crash may stop before its materialiser's first run, and the spans its predecessor
        acknowledged would stay out of the views (a refresh with nothing new costs a second)."""
        if not self.materialize_args or not self.receiver:
            return
        if not self.receiver.stats.spans_stored and not self.held_spans:
            return
        grace = self.settings.shutdown_grace_s
        # at the collector's own priority: nothing is received any more that the niced loop made way for
        log = self.settings.materialize_log_file
        code = run_child([*self.materialize_args, "--margin", "0"], 0, grace, log)
        if code == 0:
            self.last_refresh = "per-turn views cover every span stored"
        elif code is None:
            self.last_refresh = f"per-turn views not refreshed within {grace:g} s; the next start does it"
        else:
            self.last_refresh = f"last refresh of the per-turn views exited {code}; the next start retries"

    def summary(self) -> str:
        if not self.receiver:
            return "turnlens collect: stopped"
        stats = self.receiver.stats
        outcomes = ", ".join(f"{name} {count}" for name, count in sorted(stats.requests.items()))
        return (
            f"turnlens collect: stopped after {time.monotonic() - self.started_at:.0f} s; "
            f"{stats.spans_stored} spans stored, {stats.spans_rejected} rejected; "
            f"requests: {outcomes or 'none'}" + (f"; {self.last_refresh}" if self.last_refresh else "")
        )
