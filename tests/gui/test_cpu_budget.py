"""The GUI thread's CPU budget: optional work (live-plot repaints) runs only while the thread is within its share."""

from __future__ import annotations

import pytest
from batchlab.gui.cpu_budget import CpuBudget


class Clocks:
    """A fake CPU clock and wall clock that the test advances by hand."""

    def __init__(self):
        self.cpu = 0.0
        self.wall = 0.0

    def budget(self, share: float, burst_s: float) -> CpuBudget:
        return CpuBudget(share, burst_s, cpu_clock=lambda: self.cpu, wall_clock=lambda: self.wall)


def test_work_may_start_at_once_and_stops_when_the_burst_is_spent():
    c = Clocks()
    b = c.budget(share=0.02, burst_s=0.05)
    assert b.allow()
    c.cpu += 0.04  # 40 ms of work, no wall time passed (a worst case)
    assert b.allow()
    c.cpu += 0.02  # 60 ms in all: over the 50 ms burst
    assert not b.allow() and b.denied == 1
    c.wall += 0.4  # earns 8 ms: still 2 ms in debt
    assert not b.allow()
    c.wall += 0.2  # earns 4 ms more
    assert b.allow()


def test_a_greedy_consumer_never_uses_more_than_its_share_over_time():
    """Whatever the work costs, the thread's CPU stays under share x time + burst + one piece of work."""
    c = Clocks()
    share, burst, cost = 0.03, 0.05, 0.008
    b = c.budget(share, burst)
    done = 0
    for _tick in range(10_000):  # 80 ms ticks: 800 s of sweep
        c.wall += 0.08
        c.cpu += 0.0005  # required work every tick (events, table): always charged, never refused
        if b.allow():
            c.cpu += cost
            done += 1
    assert c.cpu <= share * c.wall + burst + cost
    assert c.cpu >= 0.9 * share * c.wall  # and the share is really used, not starved
    assert done > 0 and b.denied > 0
    assert b.used_share() == pytest.approx(c.cpu / c.wall)


def test_debt_from_required_work_is_forgiven_after_one_burst():
    """A long resize or file load must not freeze the plots until all of it is earned back."""
    c = Clocks()
    b = c.budget(share=0.02, burst_s=0.05)
    c.cpu += 2.0  # two CPU seconds of required work
    assert not b.allow()
    c.wall += 2 * 0.05 / 0.02 + 0.01  # from the floor (-burst) back above zero
    assert b.allow()


def test_reset_starts_full_and_the_clocks_from_now():
    c = Clocks()
    b = c.budget(share=0.02, burst_s=0.05)
    c.cpu += 1.0
    assert not b.allow()
    c.wall += 10.0
    b.reset()
    assert b.allow() and b.denied == 0 and b.used_share() == 0.0


@pytest.mark.parametrize(("share", "burst"), [(0.0, 0.05), (1.5, 0.05), (-0.1, 0.05), (0.02, -1.0)])
def test_nonsense_settings_are_refused(share, burst):
    with pytest.raises(ValueError, match="share|burst"):
        CpuBudget(share, burst)
