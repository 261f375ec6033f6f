"""How long the test suite takes: pytest run as `make test` runs it, timed from outside.

Runs `python -m pytest` with the given extra arguments (none: the whole suite, with pyproject's addopts, so
two worker processes) and prints one JSON object: wall seconds, the CPU seconds of pytest and every process
it waited for, the outcome counts of pytest's last line, and the 1-minute load average at the start, at the
end and its highest sample meanwhile (the machine may be shared: every figure is an upper bound at that load).

    .venv/bin/python bench/suite.py --json
    .venv/bin/python bench/suite.py --json -- -n 0 tests/collector/test_collect_process.py
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUTCOME = re.compile(r"(\d+) (passed|failed|error|errors|skipped|rerun|deselected|xfailed|xpassed)")


def load_1m() -> float:
    return os.getloadavg()[0]


def run(pytest_args: list[str], log: Path) -> dict[str, Any]:
    """One pytest run, its output to `log`; the load average is sampled every 10 s while it runs."""
    samples = [load_1m()]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(10):
            samples.append(load_1m())

    threading.Thread(target=sample, daemon=True).start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.call(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *pytest_args],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
        )
    wall = time.monotonic() - started
    done.set()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = log.read_text().strip().splitlines()
    outcomes = {kind: int(count) for count, kind in OUTCOME.findall(lines[-1] if lines else "")}
    return {
        "pytest_args": pytest_args,
        "exit_code": code,
        "wall_s": round(wall, 1),
        "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
        "outcomes": outcomes,
        "load_average_1m": round(samples[0], 2),
        "load_average_1m_end": round(load_1m(), 2),
        "load_average_1m_max": round(max(samples), 2),
        "log": str(log),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print only the JSON object")
    parser.add_argument("--log", type=Path, default=Path("/tmp/turnlens-suite.log"), help="pytest's output")
    parser.add_argument("pytest_args", nargs="*", help="after --: arguments for pytest")
    args = parser.parse_args()
    result = run(args.pytest_args, args.log)
    if not args.json:
        what = " ".join(args.pytest_args) or "(whole suite)"
        print(f"pytest {what}: {result['wall_s']} s", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
