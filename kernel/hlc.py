"""A hybrid logical clock (Kulkarni et al. 2014) so events of one turn can be put in causal order
although they are stamped on different machines whose wall clocks disagree.

Timestamps are packed as the contract says, `(physical_ms << 16) | logical` (see `contract.pack_hlc`).
Like CockroachDB, a clock refuses a remote timestamp further ahead of its own wall clock than
`max_offset_ms`: one bad clock must not drag every clock it talks to into the future.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from turnlens.kernel.contract import HLC_LOGICAL_MASK, pack_hlc, unpack_hlc

DEFAULT_MAX_OFFSET_MS = 500  # CockroachDB's default --max-offset


class ClockOffsetError(ValueError):
    """A remote timestamp is further ahead of the local wall clock than the clock tolerates."""

    def __init__(self, remote_ms: int, local_ms: int, max_offset_ms: int) -> None:
        self.remote_ms = remote_ms
        self.local_ms = local_ms
        self.max_offset_ms = max_offset_ms
        super().__init__(
            f"remote HLC is {remote_ms - local_ms} ms ahead of the local wall clock "
            f"(max offset {max_offset_ms} ms): rejected, the local clock is unchanged"
        )


class HybridLogicalClock:
    """One node's HLC: thread-safe, with an injectable wall clock returning Unix nanoseconds.

    `now()` applies the send/local-event rule, `update(remote)` the receive rule; both return the new
    packed timestamp, which is strictly greater than every timestamp this clock returned before.
    """

    def __init__(
        self,
        wall_clock_ns: Callable[[], int] = time.time_ns,
        *,
        max_offset_ms: int | None = DEFAULT_MAX_OFFSET_MS,
    ) -> None:
        self._wall_clock_ns = wall_clock_ns
        self.max_offset_ms = max_offset_ms
        self._lock = threading.Lock()
        self._physical = 0  # l in the paper: the largest physical time heard of, in ms
        self._logical = 0  # c in the paper

    def now(self) -> int:
        """Stamps a local or send event: the packed HLC to put on the event or the message."""
        return self.now_with_wall()[0]

    def now_with_wall(self) -> tuple[int, int]:
        """Like `now()`, also returning the wall-clock reading (ns) the stamp was made from.

        An event should carry both from the same reading, so its HLC and its own time agree.
        """
        with self._lock:
            wall_ns = self._wall_clock_ns()
            wall_ms = wall_ns // 1_000_000
            if wall_ms > self._physical:
                self._physical, self._logical = wall_ms, 0
            else:
                self._logical += 1
            return self._packed(), wall_ns

    def update(self, remote: int) -> int:
        """Applies the receive rule for a message stamped `remote`; returns the receive event's HLC.

        Raises ClockOffsetError, leaving the clock unchanged, when `remote` is more than
        `max_offset_ms` ahead of the local wall clock.
        """
        remote_ms, remote_logical = unpack_hlc(remote)
        with self._lock:
            wall_ms = self._wall_clock_ns() // 1_000_000
            if self.max_offset_ms is not None and remote_ms - wall_ms > self.max_offset_ms:
                raise ClockOffsetError(remote_ms, wall_ms, self.max_offset_ms)
            physical = max(self._physical, remote_ms, wall_ms)
            if physical == self._physical == remote_ms:
                logical = max(self._logical, remote_logical) + 1
            elif physical == self._physical:
                logical = self._logical + 1
            elif physical == remote_ms:
                logical = remote_logical + 1
            else:
                logical = 0
            self._physical, self._logical = physical, logical
            return self._packed()

    def peek(self) -> int:
        """The last timestamp issued, without ticking (0 before the first)."""
        with self._lock:
            return pack_hlc(self._physical, self._logical)

    def _packed(self) -> int:
        # Past 65,535 events in one millisecond the counter would not fit its 16 bits: borrow the next
        # millisecond instead, which keeps timestamps strictly increasing at the cost of running the
        # HLC up to a millisecond ahead of the wall clock until the wall clock catches up.
        if self._logical > HLC_LOGICAL_MASK:
            self._physical += 1
            self._logical = 0
        return pack_hlc(self._physical, self._logical)
