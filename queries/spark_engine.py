"""A full build of the derived state on Apache Spark: `turnlens materialize --engine spark --master URL`.

The driver (this process) does what a full build does before its units (materialize._full_build): the trace ->
segment index, the whole-store identity of every trace, the buckets of partitions newest first, the zero-row
files, the first manifest, and the build's first pass (`derived/.build-v<N>/`: each trace's turn, keys and
links, each turn's unit). Spark runs the rest as tasks, each on a DuckDB connection of its own on an executor
(the store's catalogue opened read-only), running the very statements a local build runs:
- identity tasks, on a store large enough to resolve the identity in chunks: each resolves one chunk's traces
  and finds their keys and links (materialize.identity_chunk_apart), written to files the driver reads back;
- shuffle tasks: each takes a batch of units, reads the first pass and the segments holding its units'
  traces, and writes each unit's input copies and turns to `derived/.shuffle-v<N>/copies/unit=<n>/` and
  `turns/unit=<n>/` (materialize.shuffle_pass);
- key-fact tasks, each submitted as soon as its batch is written: the key facts of the turns that carry a key
  turns of other units carry too (materialize.write_key_facts), which every unit reads;
- unit tasks, each submitted once its batch is written and every key-fact task has ended: one unit (a bucket,
  or a slice of a bucket larger than `bucket_spans`) computed from its files and the key facts, nothing else
  (materialize.write_unit: derived/fresh.sql and derived/steps/materialize.sql), writing the bucket's
  partition files and their rollups (a slice's files when sliced);
- join tasks: a sliced partition's slices joined into its file once they are all written, and its rollups.
As buckets finish the driver publishes them, so readers see what is done exactly as during a local build.

Why DuckDB inside Spark tasks rather than the views transpiled to Spark SQL: the views are DuckDB table macros
called on relations named by string (`query_table`), with list lambdas, `getvariable` settings and
`union all by name`; sqlglot transpiles their statements' syntax but passes the macro definitions through
as-is, which Spark SQL cannot run. One set of SQL, run by the same engine everywhere, keeps the rows equal by
construction; Spark brings the scheduling, the retries of a lost task and the executors' cores and memory.

Every executor must see the store at the same path (a shared volume) and have turnlens installed; pyspark is
the `spark` extra (`pip install 'turnlens[spark]'`) and needs Java 17.
"""

from __future__ import annotations

import math
import os
import re
import resource
import sys
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from turnlens.queries import materialize
from turnlens.queries.manifest import TABLES

DEFAULT_MASTER = "local[*]"
# the kinds of task of a build, in the order they run
IDENTITY_TASK = "identity"  # one chunk of the whole store's identity (materialize.identity_chunk_apart)
SHUFFLE_TASK = "shuffle"  # a batch of units' input files written (materialize.shuffle_pass)
KEY_FACTS_TASK = "key_facts"  # one key-fact unit's facts computed from them (materialize.write_key_facts)
UNIT_TASK = "unit"  # one unit's partition files computed from them (materialize.write_unit)
JOIN_TASK = "join"  # the slices of a partition computed in several units joined (materialize._join_slices)
KINDS = (IDENTITY_TASK, SHUFFLE_TASK, KEY_FACTS_TASK, UNIT_TASK, JOIN_TASK)


class SparkUnavailable(Exception):
    """pyspark (or the Java it needs) is not installed, or the master cannot be reached."""


class SparkBuildFailed(Exception):
    """A Spark task of the build failed past its retries; the partitions published before it stay readable."""


class SparkBuckets:
    """A materialize.BuildEngine running a full build's identity chunks, shuffle passes, units and joins of
    slices as Spark tasks.

    `master` is a Spark master URL (`local[2]`, `spark://host:7077`, `yarn`); an active SparkSession is used
    as it is (tests share one), else one is started for the build and stopped when the run ends (close).
    `task_threads` is DuckDB's threads per task (spark.task.cpus, the cores Spark reserves for it);
    `memory_limit` DuckDB's limit per task, past which it spills to derived/.spill, or to `spill_dir` on the
    executor's host when given (materialize.spill_folder).
    """

    def __init__(
        self,
        master: str = DEFAULT_MASTER,
        task_threads: int = 1,
        memory_limit: str | None = None,
        spill_dir: Path | None = None,
    ):
        self.master = master
        self.task_threads = task_threads
        self.memory_limit = memory_limit
        self.spill_dir = spill_dir
        self.tasks: list[dict[str, Any]] = []  # what each task of the last build reported
        self.session_start_s = 0.0  # how long the SparkSession took to start (0 when one was active)
        self._session: Any = None  # the session of the build under way
        self._started_here = False

    def summary(self) -> dict[str, Any]:
        """What the tasks of the last build did: how many of each kind and their seconds, and each worker's
        peak memory."""
        workers: dict[str, int] = {}
        for task in self.tasks:
            worker = f"{task['host']}:{task['worker_pid']}"
            workers[worker] = max(workers.get(worker, 0), task["peak_rss_bytes"])
        seconds = [task["seconds"] for task in self.tasks]
        of_kind = {kind: [task["seconds"] for task in self.tasks if task["kind"] == kind] for kind in KINDS}
        stages = of_kind.items()
        return {
            "master": self.master,
            "session_start_s": round(self.session_start_s, 3),
            "tasks": len(self.tasks),
            **{f"{kind}_tasks": len(spent) for kind, spent in stages},
            "task_seconds_total": round(sum(seconds), 3),
            "task_seconds_max": round(max(seconds, default=0.0), 3),
            # what the projection to more workers needs: each stage's total and its longest task
            **{f"{kind}_task_seconds_total": round(sum(spent), 3) for kind, spent in stages},
            **{f"{kind}_task_seconds_max": round(max(spent, default=0), 3) for kind, spent in stages},
            "worker_peak_rss_mb": {name: round(peak / 2**20, 1) for name, peak in sorted(workers.items())},
        }

    def _context(self) -> Any:
        """The SparkContext of the build under way: a build's first call starts (or finds) the session."""
        if self._session is None:
            self.tasks = []
            started = time.perf_counter()
            self._session, self._started_here = _session(self.master, self.task_threads)
            self.session_start_s = time.perf_counter() - started
        return self._session.sparkContext

    def close(self) -> None:
        """Stops the session the build started (an active one it found is left running)."""
        if self._session is not None and self._started_here:
            self._session.stop()
        self._session = None

    def _common(self, run: materialize._Run) -> dict[str, Any]:
        """What every task of the build is given: the store and the run, and DuckDB's threads and memory."""
        return {
            "store": str(run.store_dir),
            "segments_glob": run.segments_glob,
            "watermark": run.watermark,
            "version": run.version,
            "threads": self.task_threads,
            "memory_limit": self.memory_limit,
            "spill_dir": str(self.spill_dir) if self.spill_dir else None,
        }

    def _record(self, report: dict[str, Any]) -> None:
        self.tasks.append(report)
        for step, seconds in report["timings"].items():
            materialize.TIMINGS[f"spark {step}"] += seconds

    def identity_chunk_copies(self, run: materialize._Run) -> int:
        return materialize.identity_chunk_copies(self.task_threads)

    def identity_chunks(self, run: materialize._Run, chunks: materialize.IdentityChunks) -> None:
        """Each chunk of the whole store's identity as a task writing the chunk's rows to a file of its own,
        all submitted at once; the driver then reads them into its connection."""
        context = self._context()
        chunks.folder.mkdir(parents=True, exist_ok=True)
        specs = [
            self._common(run) | {"kind": IDENTITY_TASK, "chunks": chunks, "chunk": chunk}
            for chunk in range(chunks.count)
        ]
        group = _job_group(run)
        with ThreadPoolExecutor(max_workers=_lanes(context), thread_name_prefix="turnlens-spark") as pool:
            pending = {pool.submit(_submit, context, spec, group) for spec in specs}
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        self._record(future.result())
            except BaseException:
                _cancel(context, group, pending)
                raise
        materialize.read_identity_chunks(run, chunks)

    def units(
        self,
        run: materialize._Run,
        values: dict[str, str],
        units: list[tuple[list[str], range]],
        shuffle: materialize.Shuffle,
    ) -> Iterator[list[str]]:
        context = self._context()
        # the driver's copy of the whole store's identity: the shuffle tasks read the build's first pass
        run.step("shuffle_done")
        common = self._common(run)
        unit_specs = {
            unit: common
            | {
                "kind": UNIT_TASK,
                "values": values,
                "shuffle": str(shuffle.folder),
                "bucket": bucket,
                "slices": len(numbers),
                "slice": slice_,
                "unit": unit,
                "index": index,
            }
            for index, (bucket, numbers) in enumerate(units)
            for slice_, unit in enumerate(numbers)
        }
        fact_specs = {
            unit: common
            | {"kind": KEY_FACTS_TASK, "values": values, "shuffle": str(shuffle.folder), "unit": unit}
            for unit in shuffle.facts
        }
        facts_left = set(fact_specs)  # every unit's job reads their files: its task waits for them all
        waiting: list[dict[str, Any]] = []  # the units whose batch is written, until then
        buckets = [(bucket, len(numbers)) for bucket, numbers in units]
        left = {index: slices for index, (_, slices) in enumerate(buckets)}  # units not yet computed
        unpublished = set(left)
        # one Spark job per task, submitted newest first: the scheduler runs as many at once as it has cores.
        # The shuffle goes in as many batches as there are cores (each at most UNITS_PER_PASS units, as a
        # local pass), the key-fact units first; each key-fact unit's job once its batch is written, every
        # unit's job once its batch is written and the key-fact jobs have all ended (it reads their files),
        # and the driver publishes each bucket as soon as its last slice is. A join goes to Spark at once,
        # from a pool of its own: queued behind the units waiting in `pool`, no bucket of 30M spans was
        # published in the build's first 16 minutes.
        # Spark's FIFO scheduler gives the next free core to the earliest job submitted, the join's, since
        # `pool` submits a unit's job only when one of its own ends
        lanes = _lanes(context)
        every = len(shuffle.facts) + len(shuffle.units)
        per_pass = max(1, min(materialize.UNITS_PER_PASS, math.ceil(every / lanes)))
        pass_specs = [
            common | {"kind": SHUFFLE_TASK, "shuffle": shuffle, "units": batch}
            for batch in shuffle.passes(per_pass)
        ]
        group = _job_group(run)
        with (
            ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="turnlens-spark") as pool,
            ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="turnlens-spark-join") as joins,
        ):
            pending: set[Future[dict[str, Any]]] = {
                pool.submit(_submit, context, spec, group) for spec in pass_specs
            }
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        report = future.result()
                        self._record(report)
                        if report["kind"] == SHUFFLE_TASK:
                            shuffle.ended(report["reads"], report["copies"])
                            batch = [fact_specs[unit] for unit in report["units"] if unit in fact_specs]
                            waiting += [unit_specs[unit] for unit in report["units"] if unit in unit_specs]
                        elif report["kind"] == KEY_FACTS_TASK:
                            facts_left.discard(report["unit"])
                            batch = []
                        if report["kind"] in (SHUFFLE_TASK, KEY_FACTS_TASK):
                            if not facts_left:
                                batch, waiting = batch + waiting, []
                            pending |= {pool.submit(_submit, context, spec, group) for spec in batch}
                            continue
                        run.written_dirs.update(Path(name) for name in report["written_dirs"])
                        index = report["index"]
                        bucket, slices = buckets[index]
                        if report["kind"] == UNIT_TASK:
                            left[index] -= 1
                            if left[index] == 0 and slices > 1:  # its slices are joined by a task too
                                join = common | {"kind": JOIN_TASK, "part": bucket[0], "slices": slices}
                                pending.add(joins.submit(_submit, context, join | {"index": index}, group))
                                continue
                            if left[index] > 0:
                                continue
                        unpublished.discard(index)
                        yield bucket
            except BaseException:
                _cancel(context, group, pending)
                raise
            finally:
                pool.shutdown(wait=True)
                joins.shutdown(wait=True)
                # what tasks wrote for buckets never published: no manifest will name it (the next build
                # writes a later version), so it goes now
                for index in unpublished:
                    _remove_bucket_files(run, buckets[index][0])


def _lanes(context: Any) -> int:
    """The tasks the cluster runs at once: as many Spark jobs are kept submitted."""
    return max(1, int(context.defaultParallelism))


def _cancel(context: Any, group: str, pending: set[Future[dict[str, Any]]]) -> None:
    """After a failure: the tasks not yet submitted are dropped and the running ones interrupted."""
    for future in pending:
        future.cancel()
    context.cancelJobGroup(group)


def _job_group(run: materialize._Run) -> str:
    return f"turnlens-materialize-{run.store_dir}-v{run.version}"


def _remove_bucket_files(run: materialize._Run, bucket: list[str]) -> None:
    for part in bucket:
        for table in TABLES:
            target = run.partition_file(table, part)
            for path in [target, *target.parent.glob(f".v{run.version}.slice-*.parquet")]:
                path.unlink(missing_ok=True)


def _submit(context: Any, spec: dict[str, Any], group: str) -> dict[str, Any]:
    """Runs one task as a Spark job of one partition; its failure past Spark's retries is SparkBuildFailed."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    context.setJobGroup(group, f"turnlens {_task_name(spec)}", interruptOnCancel=True)
    try:
        result: list[dict[str, Any]] = context.parallelize([spec], 1).map(run_task).collect()
    except (PySparkException, Py4JError) as exc:
        raise SparkBuildFailed(f"{_task_name(spec)}: {_cause(exc)}") from exc
    return result[0]


def _task_name(spec: dict[str, Any]) -> str:
    """What a task computes, as its failure names it: `shuffle of units 0..15` or
    `bucket 20261205T09.. slice 1`."""
    if spec["kind"] == IDENTITY_TASK:
        return f"identity chunk {spec['chunk']}"
    if spec["kind"] == SHUFFLE_TASK:
        units = spec["units"]
        return f"shuffle of units {units[0]}..{units[-1]}"
    if spec["kind"] == JOIN_TASK:
        return f"join of partition {spec['part']}'s {spec['slices']} slices"
    if spec["kind"] == KEY_FACTS_TASK:
        return f"key facts of unit {spec['unit']}"
    return f"bucket {spec['bucket'][0]}.. slice {spec['slice']}"


def _cause(exc: BaseException) -> str:
    """The line of a failed task's report that says what went wrong: the Python worker's exception (after
    its traceback), else the first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    raised = [line for line in lines if _RAISED.match(line)]
    return raised[-1] if raised else (lines[0] if lines else type(exc).__name__)


_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): ")


def run_task(spec: dict[str, Any]) -> dict[str, Any]:
    """One task on an executor, on a DuckDB connection of its own: a shuffle task writes the input files of
    its batch of units (materialize.shuffle_pass, the whole store's identity read from the build's first
    pass); a key-fact task computes its unit's key facts from the unit's files (materialize.write_key_facts);
    a unit task (a bucket, or one slice of it) runs the local build's statements over its unit's files and
    the key facts in the shuffle folder only and writes the bucket's partition files (a slice's files when
    sliced). Returns what it did."""
    started = time.perf_counter()
    store = Path(spec["store"])
    materialize.TIMINGS.clear()
    spill_dir = Path(spec["spill_dir"]) if spec.get("spill_dir") else None
    con = materialize._connect(store, spec["segments_glob"], spec["threads"], spec["memory_limit"], spill_dir)
    try:
        run = materialize._Run(store, spec["segments_glob"], con, spec["watermark"], spec["version"])
        if spec["kind"] == IDENTITY_TASK:
            file = materialize.identity_chunk_apart(run, spec["chunks"], spec["chunk"])
            did: dict[str, Any] = {"chunk": spec["chunk"], "file": str(file)}
        elif spec["kind"] == SHUFFLE_TASK:
            shuffle: materialize.Shuffle = spec["shuffle"]
            run.step("resumed_identity", materialize._plan_values(run.folder, shuffle.plan))
            reads, copies = materialize.shuffle_pass(run, shuffle, spec["units"])
            did = {"units": spec["units"], "reads": reads, "copies": copies}
        elif spec["kind"] == KEY_FACTS_TASK:
            materialize.write_key_facts(run, spec["values"], Path(spec["shuffle"]), spec["unit"])
            did = {"unit": spec["unit"]}
        elif spec["kind"] == JOIN_TASK:
            materialize._join_slices(run, spec["part"], spec["slices"])
            did = {"index": spec["index"], "written_dirs": sorted(str(folder) for folder in run.written_dirs)}
        else:
            materialize.write_unit(
                run,
                spec["values"],
                Path(spec["shuffle"]),
                spec["bucket"],
                spec["slices"],
                spec["slice"],
                spec["unit"],
            )
            did = {
                "index": spec["index"],
                "bucket": spec["bucket"],
                "slice": spec["slice"],
                "written_dirs": sorted(str(folder) for folder in run.written_dirs),
            }
    finally:
        con.close()
    return did | {
        "kind": spec["kind"],
        "seconds": time.perf_counter() - started,
        "timings": dict(materialize.TIMINGS),
        "worker_pid": os.getpid(),
        "host": os.uname().nodename,
        # the Python worker's peak resident memory, DuckDB's included (KiB on Linux); a reused worker's
        # figure covers every task it ran
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def _session(master: str, task_threads: int) -> tuple[Any, bool]:
    """The active SparkSession, or a new one on `master` (started here: the caller stops it)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkUnavailable(
            "the spark engine needs pyspark: pip install 'turnlens[spark]' (and Java 17)"
        ) from exc
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = (
        SparkSession.builder.master(master)
        .appName("turnlens materialize")
        .config("spark.ui.enabled", "false")
        .config("spark.task.cpus", str(task_threads))
        .config("spark.speculation", "false")  # two attempts of a task would write the same files
    )
    if master.startswith("local") and "PYSPARK_PYTHON" not in os.environ:
        # workers on this host run this turnlens (a cluster's executors are told theirs by PYSPARK_PYTHON)
        os.environ["PYSPARK_PYTHON"] = sys.executable
    try:
        return builder.getOrCreate(), True
    except Exception as exc:  # the JVM did not start or the master refused: say which
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkUnavailable(f"cannot start Spark on {master}: {first}") from exc
