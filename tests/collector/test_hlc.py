"""The HLC's send and receive rules, its offset bound, its monotonicity and its 16-bit counter."""

from __future__ import annotations

import threading

import pytest
from turnlens.kernel.contract import pack_hlc, unpack_hlc
from turnlens.kernel.hlc import ClockOffsetError, HybridLogicalClock

MS = 1_000_000


class ManualWall:
    """A wall clock the test moves by hand, in milliseconds."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms * MS + 123  # sub-millisecond noise must not leak into the physical part


def test_local_events_follow_the_wall_clock_and_count_within_a_millisecond() -> None:
    wall = ManualWall(1_000)
    clock = HybridLogicalClock(wall)
    assert unpack_hlc(clock.now()) == (1_000, 0)
    assert unpack_hlc(clock.now()) == (1_000, 1)
    wall.ms = 1_005
    assert unpack_hlc(clock.now()) == (1_005, 0)


def test_a_wall_clock_that_steps_back_never_makes_time_go_backwards() -> None:
    wall = ManualWall(2_000)
    clock = HybridLogicalClock(wall)
    first = clock.now()
    wall.ms = 1_900  # NTP stepped the clock back 100 ms
    second = clock.now()
    assert second > first
    assert unpack_hlc(second) == (2_000, 1)


def test_receive_from_a_node_ahead_of_us_moves_us_past_its_timestamp() -> None:
    ours, theirs = ManualWall(10_000), ManualWall(10_120)
    receiver, sender = HybridLogicalClock(ours), HybridLogicalClock(theirs)
    receiver.now()
    sent = sender.now()
    received = receiver.update(sent)
    assert received > sent
    assert unpack_hlc(received) == (10_120, 1)
    # later local events stay ahead of the message although our wall clock is 120 ms behind
    ours.ms += 3
    assert receiver.now() > received


def test_receive_rule_takes_the_larger_counter_when_physical_parts_tie() -> None:
    wall = ManualWall(500)
    clock = HybridLogicalClock(wall)
    for _ in range(3):
        clock.now()  # (500, 2)
    assert unpack_hlc(clock.update(pack_hlc(500, 7))) == (500, 8)
    assert unpack_hlc(clock.update(pack_hlc(500, 1))) == (500, 9)
    wall.ms = 501
    assert unpack_hlc(clock.update(pack_hlc(499, 40))) == (501, 0)


def test_a_remote_timestamp_beyond_the_max_offset_is_rejected_and_leaves_the_clock_alone() -> None:
    wall = ManualWall(50_000)
    clock = HybridLogicalClock(wall, max_offset_ms=250)
    before = clock.now()
    with pytest.raises(ClockOffsetError, match="ahead"):
        clock.update(pack_hlc(50_251, 0))
    assert clock.peek() == before
    assert unpack_hlc(clock.update(pack_hlc(50_250, 0)))[0] == 50_250  # at the bound is accepted


def test_without_a_bound_any_remote_timestamp_is_accepted() -> None:
    clock = HybridLogicalClock(ManualWall(0), max_offset_ms=None)
    assert unpack_hlc(clock.update(pack_hlc(10**9, 0))) == (10**9, 1)


def test_logical_overflow_borrows_the_next_millisecond_and_stays_monotonic() -> None:
    wall = ManualWall(7_000)
    clock = HybridLogicalClock(wall)
    stamps = [clock.now() for _ in range(70_000)]
    assert all(a < b for a, b in zip(stamps, stamps[1:], strict=False))
    assert unpack_hlc(stamps[65_535]) == (7_000, 65_535)
    assert unpack_hlc(stamps[65_536]) == (7_001, 0)
    assert unpack_hlc(clock.update(pack_hlc(7_001, 65_535)))[0] == 7_002


def test_concurrent_threads_never_receive_the_same_timestamp() -> None:
    clock = HybridLogicalClock(ManualWall(1))
    results: list[list[int]] = [[] for _ in range(4)]

    def work(out: list[int]) -> None:
        for i in range(5_000):
            out.append(clock.update(pack_hlc(1, i % 3)) if i % 5 == 0 else clock.now())

    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stamps = [s for out in results for s in out]
    assert len(set(stamps)) == len(stamps) == 20_000
    for out in results:
        assert out == sorted(out)


def test_the_default_wall_clock_is_unix_time() -> None:
    import time

    physical, _ = unpack_hlc(HybridLogicalClock().now())
    assert abs(physical - time.time_ns() // MS) < 1_000
