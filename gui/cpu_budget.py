"""A cap on how much CPU the GUI thread spends on work that can wait (live-plot repaints) during a sweep.

On a small machine every millisecond the window paints is taken from TensorFlow's threads. The
window cannot know in advance what a repaint costs (it depends on the machine, the plot, how many
points and runs it shows), so it measures what its own thread really used and lets optional work
run only while the thread stays under its share. Plain Python, no Qt: tested with fake clocks.
The window's share and burst are fields of its RefreshPolicy, applied by the Refresher (gui/refresh.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class CpuBudget:
    """A leaky bucket of CPU seconds for the calling thread.

    Credit grows by `share` seconds per second of wall-clock time, up to `burst_s`; every CPU
    second the thread uses (optional work or not: event handling, the table, the status bar)
    is charged against it. `allow()` says whether optional work may run now. Over any stretch
    of time the thread then uses at most `share` of one core plus `burst_s`, unless required
    work alone costs more (it is never held back).
    """

    def __init__(
        self,
        share: float,
        burst_s: float,
        cpu_clock: Callable[[], float] = time.thread_time,
        wall_clock: Callable[[], float] = time.monotonic,
    ):
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share}")
        if burst_s < 0:
            raise ValueError(f"burst_s must be >= 0, got {burst_s}")
        self.share = share
        self.burst_s = burst_s
        self._cpu = cpu_clock
        self._wall = wall_clock
        self.reset()

    def reset(self) -> None:
        """Start full: the first work after a pause runs at once."""
        self.credit = self.burst_s
        self._last_cpu = self._cpu()
        self._last_wall = self._wall()
        self._start_cpu, self._start_wall = self._last_cpu, self._last_wall
        self.denied = 0  # times allow() said no since reset

    def _settle(self) -> None:
        cpu, wall = self._cpu(), self._wall()
        earned = self.share * max(0.0, wall - self._last_wall)
        # Debt is floored at one burst: after a spell of required work (a resize, a file load) the
        # optional work resumes within burst_s / share seconds instead of waiting it all off.
        self.credit = max(-self.burst_s, min(self.burst_s, self.credit + earned) - max(0.0, cpu - self._last_cpu))
        self._last_cpu, self._last_wall = cpu, wall

    def allow(self) -> bool:
        """True if optional work may run now (the thread is within its share)."""
        self._settle()
        if self.credit > 0:
            return True
        self.denied += 1
        return False

    def used_share(self) -> float:
        """The thread's CPU since reset as a fraction of one core (0 before any time has passed)."""
        wall = self._wall() - self._start_wall
        return (self._cpu() - self._start_cpu) / wall if wall > 0 else 0.0
