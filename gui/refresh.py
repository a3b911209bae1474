"""When the window redraws: the one refresh policy, and the one object that applies it.

During a sweep every repaint of the window is CPU taken from training (on a 2-core machine,
from TensorFlow's two threads), so how often each part of the window redraws is decided here
and nowhere else. `RefreshPolicy` holds every interval of the chain from the child's step
records to the screen; `Refresher` owns the window's timer and decides on each tick what may
redraw: which live plot, whether the CPU budget allows it, the summary, the runs table's
numbers, the status bar, and when to stop once a finished sweep has been drawn. The views only
know how to draw themselves. Clocks are injected, so the decisions are tested with fake ones.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from batchlab.core.events import STEP_FLUSH_SECONDS
from batchlab.gui.cpu_budget import CpuBudget
from PySide6.QtCore import QObject, QTimer


@dataclass(frozen=True)
class RefreshPolicy:
    """How often each part of the window may redraw while a sweep runs (all times in seconds).

    The chain, from the training child to the screen:

    - the child sends its step records every `step_flush_s` (0.25 s, `core.events.STEP_FLUSH_SECONDS`:
      the child's setting, shown here so the chain reads in one place);
    - the sweep worker hands events to the GUI thread in lists at most every `event_batch_s`
      (run, epoch and sweep events at once; step and log events wait for the next event);
    - a timer ticks every `tick_s` while data arrives; ticks alternate between the live plots
      (at most `plots_per_tick` plot updated, round robin) and the rest (summary, runs table,
      status bar), so one tick's work plus the repaint it causes stays a few ms;
    - no live plot is updated more often than every `plot_interval_s`, and only while the GUI
      thread has used less than `gui_cpu_share` of one core (a `CpuBudget` with `gui_cpu_burst_s`
      of credit); over budget, only a plot that has waited `plot_max_wait_s` is updated, so
      nothing looks frozen. Events, the table, the status bar and user input are never held back;
    - a running run's numbers in the runs table change at most every `table_interval_s` (a
      status change shows at once); the status bar (progress, ETA) every `status_interval_s`;
    - after the sweep the plot ticks catch up without the budget, then the timer stops.

    The defaults are what the benchmarks measured (docs/gui.md, docs/benchmarks.md): on the
    2-core dev VM the GUI thread used 2.6-2.7% of a core and the loss-vs-step plot redrew every
    1.8-2.2 s (median) while training kept within its 5% allowance.
    """

    tick_s: float = 0.08
    plots_per_tick: int = 1
    plot_interval_s: float = 1.0
    plot_max_wait_s: float = 5.0
    gui_cpu_share: float = 0.03
    gui_cpu_burst_s: float = 0.05
    table_interval_s: float = 1.0
    status_interval_s: float = 0.5
    event_batch_s: float = 0.05

    def __post_init__(self):
        for name in ("tick_s", "plot_interval_s", "table_interval_s", "status_interval_s", "event_batch_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0 seconds, got {getattr(self, name)}")
        if self.plots_per_tick < 1:
            raise ValueError(f"plots_per_tick must be >= 1, got {self.plots_per_tick}")
        if not self.plot_max_wait_s >= self.plot_interval_s:
            raise ValueError(
                f"plot_max_wait_s must be >= plot_interval_s ({self.plot_interval_s}), got {self.plot_max_wait_s}"
            )

    @property
    def tick_ms(self) -> int:
        """The timer's period in milliseconds."""
        return round(self.tick_s * 1000)

    @property
    def step_flush_s(self) -> float:
        """How often the training child sends step records (its setting, not the window's)."""
        return STEP_FLUSH_SECONDS


# The window's policy; a benchmark may replace it before it builds a window.
DEFAULT_POLICY = RefreshPolicy()


class PlotPacer:
    """Which live plots to bring up to date now: round robin, none more often than an interval.

    Every update of a live plot goes through here (the window's ticks and the plots' own full
    redraws after a new source or selection), so the interval counts from the last real redraw.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._drawn_at: dict[str, float] = {}
        self._next = 0

    def draw(
        self,
        plot_ids: Sequence[str],
        update: Callable[[str], bool],
        max_plots: int | None = None,
        min_interval_s: float = 0.0,
    ) -> int:
        """Call update(plot_id) for the plots due, from where the last tick stopped; how many changed.

        `update` returns True if the plot changed (then Qt repaints it); a plot that had nothing
        new does not count towards max_plots nor restart its interval.
        """
        now = self._clock()
        drawn = 0
        count = len(plot_ids)
        for offset in range(count):
            index = (self._next + offset) % count
            plot_id = plot_ids[index]
            if now - self._drawn_at.get(plot_id, -math.inf) < min_interval_s:
                continue
            if update(plot_id):
                self._drawn_at[plot_id] = now
                drawn += 1
                if max_plots is not None and drawn >= max_plots:
                    self._next = (index + 1) % count
                    break
        return drawn

    def drawn_at(self, plot_id: str) -> float:
        """When this plot last changed on screen (the pacer's clock; -inf if never)."""
        return self._drawn_at.get(plot_id, -math.inf)


class LiveView(Protocol):
    """What the refresher needs from the live plots."""

    plot_ids: Sequence[str]

    def update_plot(self, plot_id: str) -> bool: ...

    def has_pending(self) -> bool: ...


class SummaryViewLike(Protocol):
    def refresh(self, force: bool = True) -> None: ...


class TableView(Protocol):
    def refresh(self, values_due: bool = True) -> bool: ...


class Refresher(QObject):
    """Owns the window's refresh timer and every decision about what redraws on a tick (see RefreshPolicy).

    `refresh()` while the timer runs is one tick; otherwise (or with full=True) it redraws
    everything that changed at once: after loading a file, at the end of a sweep, for a test.
    """

    def __init__(
        self,
        policy: RefreshPolicy = DEFAULT_POLICY,
        parent: QObject | None = None,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.thread_time,
    ):
        super().__init__(parent)
        self.policy = policy
        self._clock = clock
        self.budget = CpuBudget(policy.gui_cpu_share, policy.gui_cpu_burst_s, cpu_clock=cpu_clock, wall_clock=clock)
        self.pacer = PlotPacer(clock)
        self.timer = QTimer(self)
        self.timer.setInterval(policy.tick_ms)
        self.draining = False
        self._ticks = 0
        self._status_shown = -math.inf  # when the status bar last showed the sweep's progress
        self._table_shown = -math.inf  # when the runs table last showed changed rows
        self._plots: LiveView | None = None
        self._summary: SummaryViewLike | None = None
        self._table: TableView | None = None
        self._show_status: Callable[[], None] = lambda: None

    def attach(
        self,
        plots: LiveView,
        summary: SummaryViewLike,
        table: TableView,
        show_status: Callable[[], None],
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        """The views to refresh; the timer calls on_tick (default: self.refresh) every tick."""
        self._plots, self._summary, self._table, self._show_status = plots, summary, table, show_status
        self.timer.timeout.connect(on_tick or self.refresh)

    @property
    def active(self) -> bool:
        """True while the timer runs (data arrives, or a finished sweep is still being drawn)."""
        return self.timer.isActive()

    def start(self) -> None:
        """Data will arrive (a sweep or a file being written): tick until `drain()` has caught up.

        The CPU budget starts full, unless data was already arriving (a followed file re-read):
        then the reading is charged like any other work.
        """
        if not self.active or self.draining:
            self.budget.reset()
            self._ticks = 0  # the first tick after a start is a plot tick
        self.draining = False
        self.timer.start()

    def drain(self) -> None:
        """No more data: plot ticks catch up without the budget, then one full refresh and the timer stops."""
        if self.active:
            self.draining = True

    def stop(self) -> None:
        self.timer.stop()
        self.draining = False

    def refresh(self, full: bool = False) -> None:
        """One tick while the timer runs; otherwise, or with full=True, everything that changed now."""
        if self.active and not full:
            self._ticks += 1
            if self._ticks % 2:
                if not self._plot_tick():
                    return
            else:
                self._rest_tick()
                return
        self._full()

    def _plot_tick(self) -> bool:
        """Update at most plots_per_tick live plots; True once draining has caught up (timer stopped)."""
        p = self.policy
        within = self.draining or self.budget.allow()  # draining: no training left to protect
        interval = p.plot_interval_s if within else p.plot_max_wait_s
        plots = self._plots
        self.pacer.draw(plots.plot_ids, plots.update_plot, max_plots=p.plots_per_tick, min_interval_s=interval)
        if not self.draining or plots.has_pending():
            return False
        self.stop()
        return True

    def _rest_tick(self) -> None:
        p = self.policy
        self._summary.refresh(force=False)
        now = self._clock()
        if self._table.refresh(values_due=now - self._table_shown >= p.table_interval_s):
            self._table_shown = now
        if now - self._status_shown >= p.status_interval_s:
            self._status_shown = now
            self._show_status()

    def _full(self) -> None:
        plots = self._plots
        self.pacer.draw(plots.plot_ids, plots.update_plot)
        self._summary.refresh(force=True)
        if self._table.refresh(values_due=True):
            self._table_shown = self._clock()
        self._show_status()
