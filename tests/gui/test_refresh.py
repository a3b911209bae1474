"""The window's one refresh policy: what each tick redraws, how often, within what CPU budget, and when it stops.

The Refresher's decisions are tested with fake clocks and stand-in views (each test drives the
ticks itself); the real window is checked to hand the same policy to every view.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import pytest
from batchlab.core.model import SweepData
from batchlab.gui import refresh
from batchlab.gui.refresh import DEFAULT_POLICY, PlotPacer, Refresher, RefreshPolicy
from batchlab.gui.worker import SweepWorker
from PySide6.QtCore import QSettings

from tests.gui.conftest import TINY, wait_until
from tests.gui.synthetic import sweep_events


class Clocks:
    """A fake wall clock and GUI-thread CPU clock that the test advances by hand."""

    def __init__(self):
        self.wall = 100.0
        self.cpu = 0.0


class FakePlots:
    """Live plots whose new data the test controls; each redraw costs `cost_s` of fake CPU."""

    plot_ids = ("loss_step", "loss_time", "loss_epoch")

    def __init__(self, clocks: Clocks, cost_s: float = 0.0, always_new: bool = False):
        self.clocks = clocks
        self.cost_s = cost_s
        self.always_new = always_new  # data arrives all the time (a running sweep)
        self.pending: set[str] = set()
        self.drawn: list[tuple[float, str]] = []  # (wall time, plot id)

    def update_plot(self, plot_id: str) -> bool:
        if not (self.always_new or plot_id in self.pending):
            return False
        self.pending.discard(plot_id)
        self.drawn.append((self.clocks.wall, plot_id))
        self.clocks.cpu += self.cost_s
        return True

    def has_pending(self) -> bool:
        return self.always_new or bool(self.pending)

    def times(self, plot_id: str) -> list[float]:
        return [t for t, p in self.drawn if p == plot_id]


class FakeSummary:
    def __init__(self):
        self.calls: list[bool] = []

    def refresh(self, force: bool = True) -> None:
        self.calls.append(force)


class FakeTable:
    """A table whose running row always has new numbers: it shows them whenever they are due."""

    def __init__(self, clocks: Clocks):
        self.clocks = clocks
        self.calls: list[bool] = []
        self.shown: list[float] = []

    def refresh(self, values_due: bool = True) -> bool:
        self.calls.append(values_due)
        if values_due:
            self.shown.append(self.clocks.wall)
        return values_due


class Harness:
    def __init__(self, policy: RefreshPolicy = DEFAULT_POLICY, cost_s: float = 0.0, always_new: bool = False):
        self.clocks = Clocks()
        self.policy = policy
        self.plots = FakePlots(self.clocks, cost_s, always_new)
        self.summary = FakeSummary()
        self.table = FakeTable(self.clocks)
        self.status: list[float] = []
        self.ticks = 0
        self.refresher = Refresher(policy, clock=lambda: self.clocks.wall, cpu_clock=lambda: self.clocks.cpu)
        self.refresher.attach(
            self.plots, self.summary, self.table, show_status=lambda: self.status.append(self.clocks.wall)
        )

    def tick(self, cpu_s: float = 0.0) -> None:
        """One timer period passes (with cpu_s of required work on the GUI thread), then the tick runs."""
        self.clocks.wall += self.policy.tick_s
        self.clocks.cpu += cpu_s
        self.ticks += 1
        self.refresher.refresh()

    def run(self, seconds: float, cpu_s: float = 0.0) -> None:
        for _ in range(round(seconds / self.policy.tick_s)):
            self.tick(cpu_s)


@pytest.fixture
def harness(qapp):
    made = []

    def make(**kwargs) -> Harness:
        made.append(Harness(**kwargs))
        return made[-1]

    yield make
    for h in made:
        h.refresher.stop()


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def test_ticks_alternate_one_plot_and_the_rest(harness):
    h = harness(always_new=True)
    h.refresher.start()
    for _ in range(3):
        drawn, summaries, tables = len(h.plots.drawn), len(h.summary.calls), len(h.table.calls)
        h.tick()  # a plot tick: exactly one plot, nothing else
        assert len(h.plots.drawn) == drawn + 1
        assert (len(h.summary.calls), len(h.table.calls)) == (summaries, tables)
        h.tick()  # the rest: summary (only if shown) and table, no plot
        assert len(h.plots.drawn) == drawn + 1
        assert h.summary.calls[-1] is False and len(h.table.calls) == tables + 1
    # round robin: each plot in turn, not the first one again and again
    assert [p for _t, p in h.plots.drawn] == list(FakePlots.plot_ids)


def test_a_plot_is_not_redrawn_more_often_than_its_interval(harness):
    h = harness(always_new=True)  # new data for every plot at every tick, as steps stream in
    h.refresher.start()
    h.run(seconds=20.0)
    interval = h.policy.plot_interval_s
    for plot_id in FakePlots.plot_ids:
        times = h.plots.times(plot_id)
        assert min(_gaps(times)) >= interval - 1e-9, plot_id
        # ...and it is redrawn as soon as it is due (within a plot tick), so nothing lags behind
        assert len(times) >= 20.0 / (interval + 2 * h.policy.tick_s) - 1, plot_id


def test_the_cpu_budget_holds_plot_repaints_back_but_a_plot_that_waited_the_max_wait_is_drawn(harness):
    policy = DEFAULT_POLICY
    h = harness(always_new=True)
    h.refresher.start()
    h.run(seconds=2.0)  # within budget: every plot drawn about once a second
    assert h.refresher.budget.denied == 0 and len(h.plots.times("loss_step")) == 2
    busy_from = h.clocks.wall
    # A second of required work (a file load, a resize), then events and the table take 10% of a
    # core, over the 3% share: from now on the budget says no.
    h.clocks.cpu += 1.0
    h.run(seconds=12.0, cpu_s=0.1 * policy.tick_s)
    assert h.refresher.budget.denied > 0
    for plot_id in FakePlots.plot_ids:
        busy = [t for t in h.plots.times(plot_id) if t > busy_from]
        last_before = max(t for t in h.plots.times(plot_id) if t <= busy_from)
        gaps = _gaps([last_before, *busy])
        assert len(busy) >= 2, plot_id  # drawn anyway: nothing looks frozen
        assert min(gaps) >= policy.plot_max_wait_s - 1e-9, plot_id  # but only after the longest wait
        assert max(gaps) <= policy.plot_max_wait_s + 2 * policy.tick_s * len(FakePlots.plot_ids), plot_id
    # The rest of the window is never held back by the budget: every other tick, all along.
    assert len(h.table.calls) == len(h.summary.calls) == h.ticks // 2


def test_the_budget_charges_what_repaints_really_cost(harness):
    """Repaints of 20 ms each: the GUI thread stays near its share of a core, however much data arrives."""
    h = harness(cost_s=0.02, always_new=True)
    h.refresher.start()
    h.run(seconds=60.0)
    policy = h.policy
    assert h.clocks.cpu <= policy.gui_cpu_share * 60.0 + policy.gui_cpu_burst_s + 0.02
    assert h.clocks.cpu >= 0.8 * policy.gui_cpu_share * 60.0  # the share is used, not starved


def test_draining_after_a_sweep_stops_the_timer_once_every_plot_caught_up(harness):
    h = harness()
    h.refresher.start()
    h.plots.pending = set(FakePlots.plot_ids)
    h.run(seconds=0.5)
    assert not h.plots.pending  # all drawn once, one per plot tick
    h.plots.cost_s = 1.0  # then repaints far over budget: while the sweep runs, plots wait
    h.clocks.cpu += 1.0
    h.plots.pending = set(FakePlots.plot_ids)
    h.run(seconds=1.0)
    assert h.refresher.budget.denied > 0 and h.plots.pending == set(FakePlots.plot_ids) and h.refresher.active
    h.refresher.drain()  # the sweep ended: no training left to protect, so the budget no longer applies
    ticks = 0
    while h.refresher.active:
        assert h.plots.pending  # the timer runs as long as some plot has data it has not drawn
        h.tick()
        ticks += 1
        assert ticks < 20
    assert not h.plots.pending
    assert ticks == 2 * len(FakePlots.plot_ids) - 1  # one plot per plot tick, a table tick between them
    # the tick that caught up ended with one full refresh: summary drawn even if hidden, status shown
    assert h.summary.calls[-1] is True and h.status[-1] == h.clocks.wall


def test_draining_waits_for_a_plot_held_back_by_its_interval(harness):
    h = harness()
    h.refresher.start()
    h.plots.pending = {"loss_step"}
    h.tick()
    drawn_at = h.clocks.wall
    assert h.plots.times("loss_step") == [drawn_at]
    h.plots.pending = {"loss_step"}  # the last steps arrive just after that redraw, then the sweep ends
    h.refresher.drain()
    h.run(seconds=h.policy.plot_interval_s - 2 * h.policy.tick_s)
    assert h.refresher.active and h.plots.pending  # not redrawn sooner than its interval, even now
    h.run(seconds=4 * h.policy.tick_s)
    assert not h.refresher.active and not h.plots.pending
    assert h.plots.times("loss_step")[-1] - drawn_at >= h.policy.plot_interval_s - 1e-9


def test_drain_does_nothing_when_the_timer_is_not_running(harness):
    h = harness()
    h.refresher.drain()
    assert not h.refresher.active and not h.refresher.draining


def test_the_status_bar_and_the_tables_numbers_are_updated_at_their_intervals(harness):
    h = harness()
    h.refresher.start()
    h.run(seconds=10.0)
    p = h.policy
    rest_tick = 2 * p.tick_s  # the status bar and the table are updated on every other tick
    for shown, interval in ((h.status, p.status_interval_s), (h.table.shown, p.table_interval_s)):
        gaps = _gaps(shown)
        assert len(shown) >= 10.0 / (interval + rest_tick) - 1
        assert min(gaps) >= interval - 1e-9 and max(gaps) <= interval + rest_tick + 1e-9
    # a status change in the table is never held back: the table is asked on every rest tick
    assert len(h.table.calls) == round(10.0 / p.tick_s) // 2


def test_a_refresh_outside_the_timer_redraws_everything_at_once(harness):
    h = harness()
    h.plots.pending = set(FakePlots.plot_ids)
    h.refresher.refresh()
    assert not h.plots.pending and h.summary.calls == [True] and h.table.calls == [True] and len(h.status) == 1


def test_the_pacer_counts_an_interval_from_the_last_real_redraw():
    now = [0.0]
    pacer = PlotPacer(clock=lambda: now[0])
    changed = {"a": True, "b": False}
    assert pacer.draw(("a", "b"), lambda p: changed[p], max_plots=1, min_interval_s=1.0) == 1
    assert pacer.drawn_at("a") == 0.0 and pacer.drawn_at("b") == -math.inf  # nothing new: no redraw counted
    now[0] = 0.5
    changed["b"] = True
    assert pacer.draw(("a", "b"), lambda p: changed[p], max_plots=1, min_interval_s=1.0) == 1
    assert pacer.drawn_at("b") == 0.5 and pacer.drawn_at("a") == 0.0  # a is not due yet


@pytest.mark.parametrize(
    ("field", "value"),
    [("tick_s", -0.1), ("plot_interval_s", -1.0), ("plots_per_tick", 0), ("plot_max_wait_s", 0.5)],
)
def test_a_nonsense_policy_is_refused(field, value):
    with pytest.raises(ValueError, match=field):
        replace(DEFAULT_POLICY, **{field: value})


def test_the_policy_is_what_the_benchmarks_measured():
    """A refactor, not a retune: docs/gui.md and docs/benchmarks.md describe exactly these numbers."""
    p = DEFAULT_POLICY
    assert (p.tick_ms, p.plots_per_tick, p.plot_interval_s, p.plot_max_wait_s) == (80, 1, 1.0, 5.0)
    assert (p.gui_cpu_share, p.gui_cpu_burst_s) == (0.03, 0.05)
    assert (p.table_interval_s, p.status_interval_s, p.event_batch_s) == (1.0, 0.5, 0.05)
    assert p.step_flush_s == refresh.STEP_FLUSH_SECONDS == 0.25


# ------------------------------------------------------------ the real window


def test_the_window_and_every_view_use_one_policy_object(qtbot, tmp_path, monkeypatch):
    from batchlab.gui.main_window import MainWindow

    monkeypatch.chdir(tmp_path)
    policy = RefreshPolicy(
        tick_s=0.03,
        plot_interval_s=0.2,
        plot_max_wait_s=0.6,
        gui_cpu_share=0.2,
        gui_cpu_burst_s=0.02,
        event_batch_s=0.1,
    )
    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat), policy=policy)
    qtbot.addWidget(w)
    w.show()
    assert w.refresher.policy is policy and w.policy is policy
    assert w.refresher.timer.interval() == 30
    assert (w.refresher.budget.share, w.refresher.budget.burst_s) == (0.2, 0.02)
    assert w.live.pacer is w.refresher.pacer  # the plots' own full redraws count towards the interval
    # a sweep (its worker's thread body replaced: nothing to train) gets the policy's event batching,
    # makes the refresher tick, and once it ends the refresher drains and stops its timer
    monkeypatch.setattr(SweepWorker, "run", lambda self: setattr(self, "status", "complete"))
    w.setup.set_values(TINY)
    w.setup.out.setText(str(tmp_path / "s.h5"))
    assert w.start_sweep()
    assert w.worker.batch_s == 0.1 and w.refresher.active
    wait_until(lambda: not w.running, timeout_s=10)
    wait_until(lambda: not w.refresher.active, timeout_s=10)
    w.close()


def test_the_default_window_uses_the_default_policy(main_window):
    w = main_window
    assert w.policy is DEFAULT_POLICY and w.refresher.policy is DEFAULT_POLICY
    assert w.refresher.timer.interval() == DEFAULT_POLICY.tick_ms and w.live.pacer is w.refresher.pacer


def test_a_real_budget_holds_plot_repaints_back_while_the_gui_thread_is_busy(main_window, monkeypatch):
    """Spend the GUI thread's CPU on required work: the next plot tick is refused by the real clocks."""
    w = main_window
    intervals = []
    monkeypatch.setattr(w.refresher.pacer, "draw", lambda ids, update, **k: intervals.append(k["min_interval_s"]))
    w.refresher.start()
    try:
        t0 = time.thread_time()
        while time.thread_time() - t0 < 2 * w.refresher.budget.burst_s:  # more CPU than the burst, at once
            sum(i * i for i in range(1000))
        w.refresh()
        assert w.refresher.budget.denied == 1 and intervals == [w.policy.plot_max_wait_s]
    finally:
        w.refresher.stop()


def _split_steps(event: dict, parts: int) -> list[dict]:
    """One epoch's steps event as the child sends it now: several chunks while the epoch runs."""
    n = len(event["step"])
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    pieces = zip(bounds, bounds[1:], strict=False)
    return [{k: (v[a:b] if isinstance(v, list) else v) for k, v in event.items()} for a, b in pieces]


def test_live_step_plots_and_the_table_follow_steps_within_an_epoch(qtbot, tmp_path, monkeypatch):
    """Steps stream every 0.25 s: the step plots and the running row change before the epoch ends."""
    from batchlab.gui.main_window import MainWindow

    monkeypatch.chdir(tmp_path)
    policy = replace(DEFAULT_POLICY, plot_interval_s=0.0, plot_max_wait_s=0.0, table_interval_s=0.0)
    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat), policy=policy)
    qtbot.addWidget(w)
    w.show()
    events = list(sweep_events(batch_sizes=(16,), epochs=2))
    first_steps = next(i for i, e in enumerate(events) if e["type"] == "steps")
    w.data = SweepData(label="live")
    w._show_sweep(w.data, "main")
    w._on_events(events[:first_steps])  # sweep and run started
    w.refresh()  # (the timer is not running: everything now, the run's row included)
    rows_changed = []
    w.table.runs_model.dataChanged.connect(lambda a, b: rows_changed.append(a.row()))
    w.refresher.start()
    try:
        chunks = _split_steps(events[first_steps], parts=4)
        for n, chunk in enumerate(chunks, start=1):
            w._on_events([chunk])
            for _ in range(2 * len(w.live.plot_ids)):  # every plot tick may draw one plot
                w.refresh()
            assert w.live._curves[("main", 0, "loss_step")].yData[-1] == pytest.approx(chunk["loss"][-1], rel=1e-6)
            assert w.live._curves[("main", 0, "loss_time")].xData[-1] == pytest.approx(chunk["wall_time"][-1])
            assert rows_changed == [0] * n  # the running row shows every chunk
        assert not len(w.data.runs[0].epochs)  # all of it before the epoch ended
        assert len(w.live._curves[("main", 0, "loss_step")].yData) == len(events[first_steps]["step"])
    finally:
        w.refresher.stop()
        w.close()


def test_following_a_file_ticks_while_it_is_written_and_stops_once_it_is_finished(main_window, tmp_path):
    from batchlab.core.runfile import RunFileWriter

    w = main_window
    path = tmp_path / "growing.h5"
    events = list(sweep_events(batch_sizes=(16, 64)))
    first_end = next(i for i, e in enumerate(events) if e["type"] == "run_ended")
    with RunFileWriter(path) as writer:
        for event in events[: first_end + 1]:
            writer.handle(event)
        writer.flush()
        assert w.open_file(str(path)) and w.follower.following
        assert w.refresher.active  # data arrives: the window ticks
        for event in events[first_end + 1 :]:
            writer.handle(event)
        writer.flush()
        time.sleep(0.05)  # a new mtime for the poll to see
    wait_until(lambda: not w.follower.following, timeout_s=10)
    wait_until(lambda: not w.refresher.active, timeout_s=10)  # caught up, then no more ticks
    assert w.live.curve_count("loss_step") == 2 and not w.live.has_pending()
