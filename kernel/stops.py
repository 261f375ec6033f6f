"""A command stopped by a signal while DuckDB runs one of its queries.

DuckDB looks for a pending signal while a query runs. It then either interrupts the query (an error,
"Query interrupted") or, when the query ends first, returns its rows, and whatever the Python handler raised
is lost. A command that only caught the exception its handler raises would go on after a Ctrl-C (the next
`--every` pass of `turnlens alerts run`) or report a stop as a failure (`turnlens materialize` stopped by the
collector). `Stops` notes the signal before its handler raises: a loop stops on `received`, and a caller
that catches a query's error tells a stop from a failure by it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


class Stops:
    """The handler of `signals` for a command: notes the signal in `received`, then raises what `raising`
    makes of it (KeyboardInterrupt for a Ctrl-C, SystemExit to run the command's cleanup and exit quietly)."""

    def __init__(
        self, signals: tuple[signal.Signals, ...], raising: Callable[[int], BaseException]
    ) -> None:
        self.signals = signals
        self.raising = raising
        self.received: int | None = None

    def __call__(self, signum: int, frame: object) -> None:
        self.received = signum
        raise self.raising(signum)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """The handler in place for the block, the previous ones restored after it. Only the main thread may
        install one: elsewhere Python's own handling applies."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {signum: signal.signal(signum, self) for signum in self.signals}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
