"""When the window redraws: the one refresh policy, and the one object that applies it.

How often each part of the window redraws during a sweep is decided here and nowhere else.
`RefreshPolicy` holds every interval of the chain from the child's step records to the screen;
`Refresher` owns the window's timer and decides on each tick what redraws. The views only know
how to draw themselves. Clocks are injected, so the decisions are tested with fake ones.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from batchlab.core.events import STEP_FLUSH_SECONDS
from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:
    from batchlab.core.model import SweepData


@dataclass(frozen=True)
class RefreshPolicy:
    """How often each part of the window redraws while a sweep runs (all times in seconds).

    The chain, from the training child to the screen:

    - the child sends its step records every `step_flush_s` (0.25 s, `core.events.STEP_FLUSH_SECONDS`:
      the child's setting, shown here so the chain reads in one place);
    - the sweep worker buffers them; a run, epoch or sweep event is handed to the GUI thread at once,
      step records and log lines are taken by the refresher at the start of each frame (a worker not
      pulled by a refresher, the range test's, hands them over at most every `event_batch_s`);
    - every `frame_s` a frame starts: the events waiting are taken, the live plots note how many
      rows each run has now (a snapshot), and the summary and the runs table are refreshed. On the ticks that follow
      (every `tick_s`) the visible tab's live plots are brought to the snapshot one per tick, so
      no tick does more than one plot's work and its repaint; once all are, the status bar shows
      the same snapshot, so it never says an epoch the plots do not show yet. Then no tick runs
      until the next frame (`next_tick_in`): the GUI thread is not woken to find nothing due;
    - a running run's numbers in the runs table change at most every `table_interval_s` (a
      status change shows at once).

    No CPU cap holds drawing back: what keeps the cost low is that a plot update does not grow with
    the curve (gui/step_envelope.py) and hidden tabs are not drawn. The cost is measured by
    bench/bench_gui_responsiveness.py (docs/benchmarks.md).
    """

    tick_s: float = 0.05
    # 0.8 s, not 0.5: every plot still moves more than once a second (a frame's plots are drawn within
    # 0.35 s of its start), and the GUI thread works and wakes less while training runs (measured: 7.3% ->
    # 5.6% of a core, 23.8 -> 18.4 wake-ups a second; docs/benchmarks.md, 2026-12-02)
    frame_s: float = 0.8
    table_interval_s: float = 1.0
    event_batch_s: float = 0.05
    # A tick draws a plot's runs for at most about this long; the rest in the next ticks (a 500-run file's
    # plots took 1.7 s drawn at once). Not a cap on a live sweep: its runs' new rows are drawn well within it.
    draw_budget_s: float = 0.015

    def __post_init__(self):
        for name in ("tick_s", "frame_s", "table_interval_s", "event_batch_s", "draw_budget_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0 seconds, got {getattr(self, name)}")

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


FRAME_SLACK_S = 1e-3  # a tick this close to a frame's time starts it (clock rounding must not put it off a tick)


def next_tick_in(policy: RefreshPolicy, now: float, frame_at: float, busy: bool) -> float:
    """Seconds from `now` until the refresher's next tick.

    While a frame still has work (`busy`: plots not yet brought to its snapshot, the status bar, the last
    frame's table) the ticks follow each other every `tick_s`; once it has none the GUI thread sleeps until
    the next frame is due (`frame_at + frame_s`), instead of waking every `tick_s` to find nothing to do.
    Every wake-up of the GUI thread takes a core from the training child's threads for a moment.
    """
    if busy:
        return policy.tick_s
    return max(0.0, frame_at + policy.frame_s - now)


class PlotPacer:
    """Updates live plots and remembers when each last changed on screen (the pacer's clock)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._drawn_at: dict[str, float] = {}

    def draw(self, plot_ids: Sequence[str], update: Callable[[str], bool], max_plots: int | None = None) -> int:
        """Call update(plot_id) in order until max_plots of them changed; how many changed.

        `update` returns True if the plot changed (then Qt repaints it).
        """
        drawn = 0
        for plot_id in plot_ids:
            if update(plot_id):
                self._drawn_at[plot_id] = self._clock()
                drawn += 1
                if max_plots is not None and drawn >= max_plots:
                    break
        return drawn

    def drawn_at(self, plot_id: str) -> float:
        """When this plot last changed on screen (the pacer's clock; -inf if never)."""
        return self._drawn_at.get(plot_id, -math.inf)


class LiveView(Protocol):
    """What the refresher needs from the live plots."""

    plot_ids: Sequence[str]
    unfinished: set[str]  # plots whose last update_plot left runs to draw (its budget ran out)

    def take_snapshot(self) -> None: ...

    def update_plot(self, plot_id: str, budget_s: float | None = None) -> bool: ...


class SummaryViewLike(Protocol):
    def refresh(self, force: bool = True) -> None: ...


class SummaryViews:
    """Views redrawn together, when a run starts or ends (the Summary and Analysis tabs): one SummaryViewLike."""

    def __init__(self, *views: SummaryViewLike):
        self.views = views

    def refresh(self, force: bool = True) -> None:
        for view in self.views:
            view.refresh(force=force)


class RunChangeView(QWidget):
    """A view of whole runs (the Summary and Analysis tabs, the explanation): redrawn when a run starts or
    ends, and only while it is shown; a hidden one catches up when it is shown (no work mid-sweep for it).

    A subclass says what it draws from (`data_version`: changes when a run starts or ends, e.g. a sweep's
    summary_version) and how it draws: either `redraw()` alone, or split in two, `figures_job()` (a callable
    that computes the figures from the data, Qt-free) and `draw(figures)` (the GUI side). A split view with a
    `worker` (gui/figure_worker.py) computes its figures off the GUI thread when `offload()` says so (a file;
    a live sweep too where the worker computes on a snapshot), showing `show_computing()` meanwhile, never
    another sweep's figures. While `live()` (a sweep runs) the figures of that same sweep stay drawn until the
    newer ones come, one job at a time: a result that came back after more runs ended is drawn, then the
    figures of the sweep as it is now are asked for. `refresh(force=True)` always computes here, now (a full
    refresh, an export, tests).
    `invalidate()` draws again now (new data, theme, selection: the figures are kept when their data is).
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._drawn_version: object = None
        self._figures: tuple[object, object] | None = None  # (data version, figures) last computed
        self.computing: object = None  # the data version whose figures the worker computes (None: none)
        self.worker = None  # a FigureWorker: set by the window
        self.offload: Callable[[], bool] = lambda: False  # True where the worker may compute (the window's rule)
        # True while the data is a live sweep's computed by the worker (see `refresh`): the window's rule
        self.live: Callable[[], bool] = lambda: False
        self._figures_of: object = None  # data_ids() of the figures in _figures
        self._computing_of: object = None  # data_ids() of the figures being computed
        self.shown = False  # between showEvent and hideEvent (read by the worker's thread: a plain attribute)
        self.drawing = False  # the worker's figures are being drawn, a part per turn of the event loop

    def data_version(self) -> object:
        raise NotImplementedError

    def data_ids(self) -> object:
        """Which data objects the view draws from (not their versions): a live sweep's figures stay drawn while
        newer ones are computed only while it is the same sweep."""
        return None

    def figures_job(self) -> Callable[[], object] | None:
        """A callable computing the figures from the data as it is now (it may run in a worker thread, so it
        holds the data, not the view); None for a view that computes while it draws (`redraw`)."""
        return None

    def draw(self, figures: object) -> None:
        raise NotImplementedError

    def draw_steps(self, figures: object) -> list[Callable[[], None]]:
        """draw(figures) as parts, each leaving the view whole for what it drew (the worker's figures are drawn a
        part per turn of the event loop); one part by default."""
        return [lambda: self.draw(figures)]

    def show_computing(self) -> None:
        """The figures are being computed in the worker: take down what was drawn from older data."""

    def redraw(self) -> None:
        """Compute and draw now, on this thread."""
        job = self.figures_job()
        version = self.data_version()
        self._figures, self._figures_of = (version, job()), self.data_ids()
        self.draw(self._figures[1])

    def invalidate(self) -> None:
        """What is drawn is out of date: draw it again now."""
        self._drawn_version = None
        self.refresh()

    def invalidate_when_shown(self) -> None:
        """What is drawn is out of date (new colours): draw it again now if shown, else when it is shown."""
        self._drawn_version = None
        self.refresh(force=False)

    def refresh(self, force: bool = True) -> None:
        """Redraw if a run started or ended since the last draw; with force=False only while visible, and (with
        a worker) the figures of a file are computed in its thread and drawn when they come back."""
        if not force and not self.isVisible():
            return
        version = self.data_version()
        if version == self._drawn_version:
            return
        if self._figures is not None and self._figures[0] == version:  # the same data, other looks
            self._drawn_version = version
            self.draw(self._figures[1])
            return
        job = self.figures_job() if not force and self.worker is not None and self.offload() else None
        if job is None:
            self.computing = None
            self._drawn_version = version
            self.redraw()
            return
        if self.computing == version:
            return
        ids = self.data_ids()
        keep = self.live() and self._figures is not None and self._figures_of == ids
        if keep and self.computing is not None:
            return  # a live sweep: one job at a time; when it comes back it is drawn and the newest asked for
        self.computing, self._computing_of = version, ids
        if not keep:  # never another sweep's figures (a live sweep's last ones stay until the new come)
            self._drawn_version = None
            self.show_computing()
        self.worker.submit(self, version, job)

    def computed(self, version: object, figures: object) -> None:
        """The worker's figures for `version` (GUI thread): drawn if they are still the data's, else dropped; a
        live sweep's are drawn even if runs ended since (they are newer than those drawn), then the figures of
        the data as it is now are asked for."""
        if version != self.computing:
            return  # a newer request, or one computed here since
        self.computing = None
        current = version == self.data_version()
        if not current and not (self.live() and self._computing_of == self.data_ids()):
            self.refresh(force=False)  # the data changed meanwhile: ask for the figures of what it is now
            return
        self._figures, self._figures_of = (version, figures), self._computing_of
        if self.isVisible():
            self._drawn_version = version
            self._draw_stepwise(version, self.draw_steps(figures))
        if not current:
            self.refresh(force=False)

    def _draw_stepwise(self, version: object, steps: list[Callable[[], None]]) -> None:
        """One part now, the next in the next turn of the event loop, while `version` is still what is drawn
        (`drawing` is True until the last part is drawn or the parts are dropped)."""
        if self._drawn_version != version:
            self.drawing = False  # newer data or looks were drawn meanwhile: these parts are stale
            return
        steps.pop(0)()
        self.drawing = bool(steps)
        if steps:
            QTimer.singleShot(0, self, lambda: self._draw_stepwise(version, steps))

    def compute_failed(self, version: object, message: str) -> None:
        """The worker could not compute `version`'s figures: computed here instead (its error, if any, raised
        on the GUI thread as before)."""
        if version == self.computing:
            self.computing = None
            if version == self.data_version():
                self.refresh(force=True)

    def compute_skipped(self, version: object) -> None:
        """The worker did not compute `version`'s figures (the view was hidden by then): asked again when shown."""
        if version == self.computing:
            self.computing = None
            self.refresh(force=False)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self.shown = True
        self.refresh(force=False)

    def hideEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().hideEvent(event)
        self.shown = False


class MainSweepView(RunChangeView):
    """A RunChangeView of the main sweep alone: a comparison is not drawn (its own file's report has it)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.data: SweepData | None = None

    def set_source(self, source: str, data: SweepData | None) -> None:
        if source != "main":
            return
        self.data = data
        self.invalidate_when_shown()  # hidden, it draws when shown (a 500-run file's explanation took 1.2 s)

    def data_version(self) -> object:
        return self.data.summary_version if self.data is not None else -1

    def data_ids(self) -> object:
        return id(self.data)


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
    ):
        super().__init__(parent)
        self.policy = policy
        self._clock = clock
        self.pacer = PlotPacer(clock)
        # One shot at a time: each tick schedules the next (next_tick_in), so the GUI thread is not woken
        # between frames when nothing is due. Precise: a coarse timer may fire up to 5% early, before its frame.
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(policy.tick_ms)
        self._running = False  # ticking: between start() and stop() (the single-shot timer is idle inside a tick)
        self.next_tick_at = math.inf  # when the next tick is scheduled (the refresher's clock)
        self.ticks = 0  # ticks run since the window opened (benchmarks count the GUI thread's wake-ups)
        self._frame_at = -math.inf  # when the last frame started
        self._due: list[str] = []  # plots not yet brought to this frame's snapshot
        self._status_due = False  # the status bar shows the snapshot once the plots do
        self._table_shown = -math.inf  # when the runs table last showed changed rows
        self._plots: LiveView | None = None
        self._summary: SummaryViewLike | None = None
        self._table: TableView | None = None
        self._show_status: Callable[[], None] = lambda: None
        self._take_events: Callable[[], object] = lambda: None
        self._draining = False  # drain() began: the last frame is being drawn, then the timer stops
        self._drain_table = False

    def attach(
        self,
        plots: LiveView,
        summary: SummaryViewLike,
        table: TableView,
        show_status: Callable[[], None],
        on_tick: Callable[[], None] | None = None,
        take_events: Callable[[], object] | None = None,
    ) -> None:
        """The views to refresh; the timer calls on_tick (default: self.refresh) every tick.

        take_events: called at the start of each frame and of the last one, before the snapshot: hands the
        views the events waiting in the sweep worker's buffer (step records arrive with the frames instead of
        waking the GUI thread every 0.25 s).
        """
        self._plots, self._summary, self._table, self._show_status = plots, summary, table, show_status
        if take_events is not None:
            self._take_events = take_events
        self.timer.timeout.connect(on_tick or self.refresh)

    @property
    def active(self) -> bool:
        """True while the refresher ticks (data arrives, or the last frame is being drawn)."""
        return self._running

    def start(self) -> None:
        """Data will arrive (a sweep or a file being written): tick until `drain()`; the first tick starts a frame."""
        if not self.active or self._draining:
            self._frame_at = -math.inf
            self._schedule(self.policy.tick_s)
        self._draining = False
        self._running = True

    def _schedule(self, delay_s: float) -> None:
        self.next_tick_at = self._clock() + delay_s
        self.timer.start(max(1, math.ceil(delay_s * 1000)))

    def _busy(self) -> bool:
        """True while the current frame has work left for the next tick."""
        return bool(self._due) or self._status_due or self._draining

    def drain(self) -> None:
        """No more data: one last frame brings everything shown up to date, then the timer stops.

        As during a sweep, the last frame draws one plot per tick, then the runs table, then the status
        bar and the views of whole runs that are shown: the plots all refitting to their data in one go
        (their ranges were sticky while data arrived) took ~80 ms of the GUI thread at a sweep's end, its
        longest stall. Views of whole runs on a hidden tab (Summary, Analysis, the explanation) are left to
        catch up when shown: drawing all three at once took ~105 ms (the explanation's fits alone ~40 ms).
        """
        if self.active and not self._draining:
            self._draining = True
            self._take_events()
            self._plots.take_snapshot()
            self._due = list(self._plots.plot_ids)
            self._drain_table = True
            self._schedule(self.policy.tick_s)  # not at the next frame: the last one starts now

    def draw_again(self) -> None:
        """While ticking: every plot is due again in this frame (a tab shown or a selection made mid-frame), drawn a
        plot per tick from the next one, not all at once by the caller."""
        if self.active:
            self._due = list(self._plots.plot_ids)
            self._schedule(self.policy.tick_s)

    @property
    def live(self) -> bool:
        """True while data arrives: the timer runs and no drain has begun (plots keep sticky ranges)."""
        return self.active and not self._draining

    def stop(self) -> None:
        self.timer.stop()
        self._running = False
        self.next_tick_at = math.inf
        self._due = []
        self._draining = False

    def refresh(self, full: bool = False) -> None:
        """One tick while the timer runs; otherwise, or with full=True, everything that changed now."""
        if self.active and not full:
            self.ticks += 1
            self._tick()
            if self.active:  # (the last frame's final tick stopped it)
                self._schedule(next_tick_in(self.policy, self._clock(), self._frame_at, self._busy()))
        else:
            self._full()

    def _tick(self) -> None:
        if self._draining:
            self._drain_tick()
            return
        now = self._clock()
        if now - self._frame_at >= self.policy.frame_s - FRAME_SLACK_S:  # the tick next_tick_in set for it
            self._frame_at = now
            if self._status_due:  # the last frame's plots did not all draw before this one (a loaded machine):
                self._show_status()  # the status bar still moves once a frame, as far as the plots got
            self._take_events()
            self._plots.take_snapshot()
            # plots the last frame did not reach go first, so that on a loaded machine none waits forever
            left = [p for p in self._due if p in self._plots.plot_ids]
            self._due = left + [p for p in self._plots.plot_ids if p not in left]
            self._status_due = True
            self._summary.refresh(force=False)
            if self._table.refresh(values_due=now - self._table_shown >= self.policy.table_interval_s):
                self._table_shown = now
            return
        if self._draw_one_due():
            return
        if self._status_due:  # every plot shows the snapshot now: the status bar says the same
            self._status_due = False
            self._show_status()

    def _draw_one_due(self) -> bool:
        """Bring the next due plot that changes to the snapshot; True if one did (one plot per tick; a plot
        with nothing new costs nothing). A plot with more runs to draw than the tick's budget stays due."""
        budget = self.policy.draw_budget_s
        while self._due:
            plot_id = self._due.pop(0)
            drawn = self.pacer.draw([plot_id], lambda p: self._plots.update_plot(p, budget_s=budget))
            if plot_id in self._plots.unfinished:  # this tick's budget went on it: the rest next tick
                self._due.insert(0, plot_id)
                return True
            if drawn:
                return True
        return False

    def _drain_tick(self) -> None:
        """One tick of the last frame (see drain): one plot that changes, else the table, else the rest and stop."""
        if self._draw_one_due():
            return
        if self._drain_table:
            self._drain_table = False
            if self._table.refresh(values_due=True):
                self._table_shown = self._clock()
                return
        self._summary.refresh(force=False)
        self._show_status()
        self.stop()

    def _full(self) -> None:
        plots = self._plots
        self._take_events()
        plots.take_snapshot()
        self._due = []
        self.pacer.draw(plots.plot_ids, plots.update_plot)
        self._summary.refresh(force=True)
        if self._table.refresh(values_due=True):
            self._table_shown = self._clock()
        self._show_status()
