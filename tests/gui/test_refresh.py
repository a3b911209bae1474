"""The window's one refresh policy: frames at a fixed rate, one plot per tick, status and plots from one snapshot.

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
from batchlab.gui.refresh import DEFAULT_POLICY, Refresher, RefreshPolicy, next_tick_in
from batchlab.gui.worker import SweepWorker
from PySide6.QtCore import QSettings
from PySide6.QtTest import QTest

from tests.gui.conftest import TINY, wait_until
from tests.gui.synthetic import sweep_events


class Clocks:
    """A fake wall clock that the test advances by hand."""

    def __init__(self):
        self.wall = 100.0


class FakePlots:
    """Live plots whose new data the test controls."""

    plot_ids = ("loss_step", "loss_time", "loss_epoch")

    def __init__(self, clocks: Clocks, always_new: bool = False):
        self.clocks = clocks
        self.always_new = always_new  # data arrives all the time (a running sweep)
        self.pending: set[str] = set()
        self.drawn: list[tuple[float, str]] = []  # (wall time, plot id)
        self.snapshots: list[float] = []
        self.slices: dict[str, int] = {}  # plot id -> calls it still needs (more runs than one budget draws)
        self.unfinished: set[str] = set()
        self.budgets: list[float | None] = []

    def take_snapshot(self) -> None:
        self.snapshots.append(self.clocks.wall)

    def update_plot(self, plot_id: str, budget_s: float | None = None) -> bool:
        self.budgets.append(budget_s)
        self.unfinished.discard(plot_id)
        if not (self.always_new or plot_id in self.pending):
            return False
        left = self.slices.get(plot_id, 1) - 1
        if left > 0 and budget_s is not None:
            self.slices[plot_id] = left
            self.unfinished.add(plot_id)
        else:
            self.pending.discard(plot_id)
        self.drawn.append((self.clocks.wall, plot_id))
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
    def __init__(self, policy: RefreshPolicy = DEFAULT_POLICY, always_new: bool = False):
        self.clocks = Clocks()
        self.policy = policy
        self.plots = FakePlots(self.clocks, always_new)
        self.summary = FakeSummary()
        self.table = FakeTable(self.clocks)
        self.status: list[float] = []
        self.ticks = 0
        self.refresher = Refresher(policy, clock=lambda: self.clocks.wall)
        self.refresher.attach(
            self.plots, self.summary, self.table, show_status=lambda: self.status.append(self.clocks.wall)
        )

    def tick(self) -> None:
        """One timer period passes, then the tick runs."""
        self.clocks.wall += self.policy.tick_s
        self.ticks += 1
        self.refresher.refresh()

    def run(self, seconds: float) -> None:
        for _ in range(round(seconds / self.policy.tick_s)):
            self.tick()

    def run_scheduled(self, seconds: float) -> None:
        """Only the ticks the refresher schedules run (as its single-shot timer does), for `seconds`."""
        end = self.clocks.wall + seconds
        while self.refresher.active and self.refresher.next_tick_at <= end:
            self.clocks.wall = self.refresher.next_tick_at
            self.ticks += 1
            self.refresher.refresh()
        self.clocks.wall = end


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


def test_while_data_arrives_every_plot_is_redrawn_at_least_once_a_second(harness):
    """Item 1 of issue 11: no CPU cap holds plots back; each frame brings every plot to its snapshot."""
    h = harness(always_new=True)
    h.refresher.start()
    h.run(seconds=10.0)
    for plot_id in FakePlots.plot_ids:
        times = h.plots.times(plot_id)
        assert len(times) >= 10, plot_id
        gaps = _gaps(times)
        assert max(gaps) <= h.policy.frame_s + h.policy.tick_s + 1e-9 <= 1.0, plot_id


def test_a_plot_with_more_runs_than_a_tick_draws_stays_due_until_all_are_drawn(harness):
    """A 500-run file's last frame: each tick draws a slice of one plot's runs (the budget), never all at once."""
    h = harness()
    h.plots.pending = set(FakePlots.plot_ids)
    h.plots.slices = {"loss_step": 3}
    h.refresher.start()
    h.refresher.drain()
    while h.refresher.active and h.ticks < 20:
        h.tick()
    assert [p for _t, p in h.plots.drawn] == ["loss_step"] * 3 + ["loss_time", "loss_epoch"]
    assert set(h.plots.budgets) == {h.policy.draw_budget_s} and not h.refresher.active
    assert h.status  # the status bar once everything is drawn


def test_a_frame_takes_one_snapshot_then_one_plot_per_tick(harness):
    h = harness(always_new=True)
    h.refresher.start()
    h.tick()  # the first tick starts a frame: snapshot, summary, table; no plot yet
    assert len(h.plots.snapshots) == 1 and h.plots.drawn == [] and h.summary.calls and h.table.calls
    for n in range(1, len(FakePlots.plot_ids) + 1):
        h.tick()
        assert [p for _t, p in h.plots.drawn] == list(FakePlots.plot_ids[:n])  # one per tick, in order
        assert h.status == []  # not before every plot shows the snapshot
    h.tick()  # every plot drew this frame: the status bar says the same; then nothing until the next frame
    assert len(h.plots.drawn) == len(FakePlots.plot_ids) and len(h.plots.snapshots) == 1
    assert h.status == [h.clocks.wall]
    # the status bar is shown once a frame, from the same snapshot as the plots
    h.run(seconds=2.0)
    assert len(h.plots.snapshots) - 1 <= len(h.status) <= len(h.plots.snapshots)  # the last frame may be drawing


def test_a_plot_with_nothing_new_does_not_use_up_a_tick(harness):
    h = harness()
    h.refresher.start()
    h.tick()  # frame start
    h.plots.pending = {"loss_epoch"}
    h.tick()
    assert h.plots.drawn == [(h.clocks.wall, "loss_epoch")]  # the two step plots had nothing: skipped


def test_draining_after_a_sweep_draws_everything_shown_one_plot_per_tick_then_stops(harness):
    h = harness()
    h.refresher.start()
    h.tick()
    h.plots.pending = set(FakePlots.plot_ids)
    h.refresher.drain()
    # the last frame is drawn as during a sweep, one plot per tick (all at once, the plots refitting to
    # their data, was the sweep's longest GUI stall, ~80 ms), and the plots' ranges stop being sticky
    assert h.refresher.active and not h.refresher.live and h.plots.drawn == []
    for n in range(1, len(FakePlots.plot_ids) + 1):
        h.tick()
        assert [p for _t, p in h.plots.drawn] == list(FakePlots.plot_ids[:n])
    extra = 0
    while h.refresher.active and extra < 5:  # then the table, then the status bar and shown views; then it stops
        h.tick()
        extra += 1
    assert not h.refresher.active and extra <= 2 and h.plots.pending == set()
    # the views of whole runs only if shown (force=False): a hidden Summary/Analysis tab catches up when shown,
    # instead of ~0.1 s of fits in one go at the sweep's end
    assert h.summary.calls[-1] is False and h.table.calls[-1] is True and h.status
    h.refresher.refresh()  # outside the timer: everything, hidden views too
    assert h.summary.calls[-1] is True


def test_a_sweep_started_while_the_last_one_drains_ticks_on_live(harness):
    h = harness()
    h.refresher.start()
    h.tick()
    h.refresher.drain()
    h.refresher.start()
    assert h.refresher.live
    h.plots.pending = {"loss_epoch"}
    h.tick()  # a new frame starts at once
    h.tick()
    assert h.plots.drawn[-1][1] == "loss_epoch" and h.refresher.active


def test_the_next_tick_is_one_period_away_while_a_frame_has_work_else_at_the_next_frame():
    p = RefreshPolicy(tick_s=0.05, frame_s=0.5)
    assert next_tick_in(p, now=10.2, frame_at=10.0, busy=True) == 0.05
    assert next_tick_in(p, now=10.2, frame_at=10.0, busy=False) == pytest.approx(0.3)
    assert next_tick_in(p, now=10.6, frame_at=10.0, busy=False) == 0.0  # a frame is overdue: at once
    assert next_tick_in(p, now=10.0, frame_at=-math.inf, busy=False) == 0.0  # none yet


def test_between_frames_the_gui_thread_is_not_woken(harness):
    """Only the ticks a frame needs run: its start, one per changed plot, the status bar; then sleep."""
    h = harness(always_new=True)
    h.refresher.start()
    h.run_scheduled(seconds=10.0)
    frames = len(h.plots.snapshots)
    expected = 10.0 / h.policy.frame_s
    assert expected - 1 <= frames <= expected + 1  # still a frame every frame_s: what the user sees is unchanged
    for plot_id in FakePlots.plot_ids:
        assert max(_gaps(h.plots.times(plot_id))) <= h.policy.frame_s + h.policy.tick_s + 1e-9
    assert len(h.status) >= frames - 1
    per_frame = 1 + len(FakePlots.plot_ids) + 1
    assert h.ticks <= per_frame * frames  # 5 a frame, not the 10 a 50 ms timer ran
    h2 = harness()  # nothing new arrives: a frame is its start and the status bar's tick
    h2.refresher.start()
    h2.run_scheduled(seconds=10.0)
    assert h2.ticks <= 2 * len(h2.plots.snapshots) <= 2 * (expected + 1) and h2.plots.drawn == []


def test_the_tick_set_for_a_frame_starts_it_though_the_clock_reads_a_hair_early(harness):
    """Frames every frame_s, not frame_s plus a tick: a timer or float sum a fraction of a ms short must not
    put the frame off to the following tick (the old 50 ms grid made frames 0.55 s apart)."""
    h = harness()
    h.refresher.start()
    h.run_scheduled(seconds=0.2)
    assert len(h.plots.snapshots) == 1
    h.clocks.wall = h.refresher.next_tick_at - 0.0005
    h.refresher.refresh()
    assert len(h.plots.snapshots) == 2


def test_draining_starts_the_last_frame_at_once_not_at_the_next_frame(harness):
    h = harness()
    h.refresher.start()
    h.run_scheduled(seconds=0.2)  # a frame started and everything is shown: the next tick is the next frame
    assert h.refresher.next_tick_at > h.clocks.wall + h.policy.tick_s
    h.plots.pending = set(FakePlots.plot_ids)
    h.refresher.drain()
    assert h.refresher.next_tick_at == pytest.approx(h.clocks.wall + h.policy.tick_s)
    h.run_scheduled(seconds=1.0)
    assert h.plots.pending == set() and not h.refresher.active and h.ticks <= 2 + 3 + 2


def test_drain_does_nothing_when_the_timer_is_not_running(harness):
    h = harness()
    h.refresher.drain()
    assert h.plots.drawn == [] and not h.refresher.active


def test_the_tables_numbers_are_updated_at_their_interval(harness):
    h = harness(always_new=True)
    h.refresher.start()
    h.run(seconds=5.0)
    assert len(h.table.calls) == len(h.plots.snapshots)  # the table is looked at every frame
    gaps = _gaps(h.table.shown)
    assert min(gaps) >= h.policy.table_interval_s - 1e-9 and max(gaps) <= h.policy.table_interval_s + h.policy.frame_s


def test_a_refresh_outside_the_timer_redraws_everything_at_once(harness):
    h = harness()
    h.plots.pending = set(FakePlots.plot_ids)
    h.refresher.refresh()
    assert h.plots.pending == set() and h.summary.calls == [True] and h.status


@pytest.mark.parametrize("field,value", [("tick_s", -0.1), ("frame_s", -1.0), ("table_interval_s", -1.0)])
def test_a_nonsense_policy_is_refused(field, value):
    with pytest.raises(ValueError, match=field):
        replace(DEFAULT_POLICY, **{field: value})


def test_the_policy_is_what_the_benchmarks_measured():
    """docs/gui.md and docs/benchmarks.md describe exactly these numbers."""
    p = DEFAULT_POLICY
    assert (p.tick_ms, p.frame_s, p.table_interval_s, p.event_batch_s) == (50, 0.8, 1.0, 0.05)
    assert p.step_flush_s == refresh.STEP_FLUSH_SECONDS == 0.25


# ------------------------------------------------------------ the real window


def test_the_window_and_every_view_use_one_policy_object(qtbot, tmp_path, monkeypatch):
    from batchlab.gui.main_window import MainWindow

    monkeypatch.chdir(tmp_path)
    policy = RefreshPolicy(tick_s=0.03, frame_s=0.2, event_batch_s=0.1)
    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat), policy=policy)
    qtbot.addWidget(w)
    w.show()
    assert w.refresher.policy is policy and w.policy is policy
    assert w.refresher.timer.interval() == 30
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
    policy = replace(DEFAULT_POLICY, frame_s=1000.0, table_interval_s=0.0)  # frames only when the test says
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
            w.refresher._frame_at = -math.inf  # a frame is due
            for _ in range(1 + len(w.live.plot_ids)):  # the frame's snapshot, then one plot per tick
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


def test_status_bar_and_plots_show_the_same_epoch_mid_run(main_window):
    """Events keep arriving between the frame's snapshot and a plot's tick: both still show the snapshot."""
    w = main_window
    events = list(sweep_events(batch_sizes=(16,), epochs=3))
    epoch_end = [i for i, e in enumerate(events) if e["type"] == "epoch_ended"]
    data = SweepData(label="live")
    w.live.set_source("main", data)
    for event in events[: epoch_end[0] + 1]:
        data.handle(event)
    w.live.take_snapshot()  # a frame starts here: one epoch done
    for event in events[epoch_end[0] + 1 : epoch_end[1] + 1]:
        data.handle(event)  # the second epoch arrives before the plots' ticks
    for plot_id in w.live.plot_ids:
        w.live.update_plot(plot_id)
    assert len(w.live._curves[("main", 0, "train_loss")].xData) == 1
    assert len(w.live._curves[("main", 0, "throughput")].xData) == 1
    shown_steps = len(w.live._curves[("main", 0, "loss_step")].xData)
    assert shown_steps == len(events[epoch_end[0] - 1]["step"])  # the first epoch's steps, not the second's
    assert "epoch 1/3" in w.live.status_text() and f"step {shown_steps}" in w.live.status_text()


def test_the_status_says_tensorflow_is_starting_with_the_time_it_has_taken(qapp):
    from batchlab.gui.live_plots import LivePlots
    from batchlab.gui.plot_style import BatchColours

    now = [50.0]
    live = LivePlots(BatchColours(), clock=lambda: now[0])
    live.show()
    events = list(sweep_events(batch_sizes=(16, 64), epochs=1))
    data = SweepData(label="live")
    live.set_source("main", data)
    data.handle(events[0])  # sweep_started: the first child is loading TensorFlow
    live.take_snapshot()
    now[0] += 3.2
    assert live.status_text() == "Run 1/2 · batch 16 · starting TensorFlow / building the model… 3 s"
    data.handle(events[1])  # run_started: the model is built, no step yet
    live.take_snapshot()
    now[0] += 1.0
    assert live.status_text() == "Run 1/2 · batch 16 · first step (tracing the model)… 1 s"
    second = next(i for i, e in enumerate(events) if e["type"] == "run_started" and e["run"] == 1)
    for event in events[2:second]:
        data.handle(event)  # run 1 ended: the next child starts, the status says so (not the old run)
    live.take_snapshot()
    now[0] += 2.0
    assert live.status_text() == "Run 2/2 · batch 64 · starting TensorFlow / building the model… 2 s"
    live.close()


def test_the_summary_analysis_and_explanation_redraw_when_a_run_ends_and_only_while_shown(main_window):
    """One rule for the three views of whole runs (gui/refresh.py RunChangeView): a run starting or ending makes
    them out of date; a hidden one is drawn when it is shown, once, and steps alone never redraw them."""
    w = main_window
    views = {"summary": w.summary, "explanation": w.explanation, "analysis": w.analysis}
    redrawn = {name: 0 for name in views}
    for name, view in views.items():
        draw = view.redraw

        def counting(name=name, draw=draw):
            redrawn[name] += 1
            draw()

        view.redraw = counting
    w.views.setCurrentWidget(w.live)
    data = SweepData(label="live")
    w._show_sweep(data, "main")  # a new source draws at once, shown or not
    assert all(redrawn.values())

    def since(before: dict) -> dict:
        return {name: redrawn[name] - before[name] for name in views}

    start = dict(redrawn)
    events = list(sweep_events(batch_sizes=(16, 64), epochs=2))
    first_end = next(i for i, e in enumerate(events) if e["type"] == "run_ended")
    for event in events[: first_end + 1]:
        data.handle(event)
        w.refresher._summary.refresh(force=False)  # what each frame of a sweep does
    assert since(start) == {"summary": 0, "explanation": 0, "analysis": 0}  # hidden: nothing drawn mid-sweep
    w.views.setCurrentWidget(w.summary_splitter)  # the summary and its explanation catch up
    assert since(start) == {"summary": 1, "explanation": 1, "analysis": 0}
    for _ in range(3):
        w.refresher._summary.refresh(force=False)
    assert since(start) == {"summary": 1, "explanation": 1, "analysis": 0}  # nothing new: nothing drawn
    w.views.setCurrentWidget(w.analysis)
    assert since(start) == {"summary": 1, "explanation": 1, "analysis": 1}
    data.handle(events[first_end + 1])  # the next run starts: out of date while shown, drawn on the next frame
    w.refresher._summary.refresh(force=False)
    assert since(start) == {"summary": 1, "explanation": 1, "analysis": 2}


# ------------------------------------------------------------ events taken at the frames


def test_each_frame_and_the_last_one_take_the_waiting_events_before_their_snapshot(harness):
    h = harness()
    order: list[str] = []
    h.refresher._take_events = lambda: order.append("events")
    snapshot = h.plots.take_snapshot
    h.plots.take_snapshot = lambda: (order.append("snapshot"), snapshot())
    h.refresher.start()
    h.run_scheduled(0.1 + 2 * h.policy.frame_s)  # frames at 0.05, 0.05 + frame_s and 0.05 + 2 frame_s
    assert order == ["events", "snapshot"] * 3
    order.clear()
    h.refresher.drain()
    assert order == ["events", "snapshot"]  # the sweep's end: what is left is handled before the last frame


class _ScriptedWorker(SweepWorker):
    """A pulled sweep worker whose sweep sinks a fixed list of events from its thread (no training)."""

    def __init__(self, script, tmp_path, hold=None):
        super().__init__(build_spec_tiny(), str(tmp_path / "w.h5"), pulled=True)
        self.script, self.hold = script, hold

    def execute(self, runner) -> str:
        for event in self.script:
            self._sink(dict(event))
        if self.hold is not None:
            self.hold.wait(10)
        return "complete"


def build_spec_tiny():
    from batchlab.core.spec import build_spec

    return build_spec(TINY)


def _script() -> list[dict]:
    events = list(sweep_events(batch_sizes=(16, 64), epochs=2))
    out = []
    for e in events:  # every steps event as four chunks, as the child sends them, and a log line among them
        if e["type"] == "steps":
            out += _split_steps(e, parts=4)
            out.append({"type": "log", "level": "info", "message": f"chunked {len(out)}", "run": e["run"]})
        else:
            out.append(e)
    return out


def test_a_pulled_worker_wakes_the_gui_thread_only_for_structural_events_and_loses_nothing(qapp, tmp_path):
    """Step records and log lines wait in the buffer for a frame; every event reaches the window once, in order,
    the last ones at the sweep's end."""
    import threading

    script = _script()
    quiet = [e for e in script if e["type"] in ("steps", "log")]
    assert len(quiet) > len(script) / 2
    # 1. only quiet events: nothing is delivered until the GUI thread asks (a frame), then all of them
    hold = threading.Event()
    worker = _ScriptedWorker(quiet, tmp_path, hold)
    got: list[list[dict]] = []
    worker.events.connect(got.append)
    worker.start()
    wait_until(lambda: len(worker._pending) == len(quiet), timeout_s=20)
    qapp.processEvents()
    assert got == []  # no wake-up of the GUI thread for step records and log lines
    assert worker.deliver() == len(quiet)  # a frame takes them all, in order
    assert [e["step"] if e["type"] == "steps" else e["message"] for e in got[0]] == [
        e["step"] if e["type"] == "steps" else e["message"] for e in quiet
    ]
    hold.set()
    wait_until(lambda: worker.isFinished(), timeout_s=20)
    # 2. the whole sweep, frames taking events now and then while the worker sinks: order kept, none lost
    worker = _ScriptedWorker(script, tmp_path)
    got = []
    worker.events.connect(got.append)
    worker.start()
    deadline = time.monotonic() + 120  # a worker that never finishes fails here instead of hanging the suite
    while not worker.isFinished():
        assert time.monotonic() < deadline, (worker.isRunning(), len(worker._pending), sum(map(len, got)), len(script))
        worker.deliver()  # a frame
        # then let the worker sink for a moment, as between two frames (wait_until(lambda: True) returned at
        # once: the GUI thread spun on deliver() and its lock, which a loaded machine may let starve the worker)
        QTest.qWait(5)
    qapp.processEvents()  # the wake-up the end of run() queued (the window also delivers on `finished`)
    flat = [e for batch in got for e in batch]
    assert all(batch for batch in got)  # never an empty list
    assert [(e["type"], e.get("run"), e.get("step", [None])[0]) for e in flat] == [
        (e["type"], e.get("run"), e.get("step", [None])[0]) for e in script
    ]
    assert worker._pending == []


def test_the_window_takes_a_sweeps_step_records_at_its_frames_and_all_at_the_end(qtbot, tmp_path, monkeypatch):
    """The window's worker is pulled: the live plots and the status bar get the step records from the frames,
    and the events still waiting when the sweep ends are handled before its last frame."""
    from batchlab.gui.main_window import MainWindow

    monkeypatch.chdir(tmp_path)
    script = [e for e in sweep_events(batch_sizes=(16,), epochs=1)]
    first_steps = next(i for i, e in enumerate(script) if e["type"] == "steps")
    chunks = _split_steps(script[first_steps], parts=4)
    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    w.setup.set_values(TINY)
    w.setup.out.setText(str(tmp_path / "s.h5"))
    import threading

    hold = threading.Event()
    # the sweep: its start events, then step records only (quiet), then it waits until the test lets it end
    monkeypatch.setattr(
        SweepWorker,
        "execute",
        lambda self, runner: ([self._sink(dict(e)) for e in script[:first_steps] + chunks], hold.wait(20), "complete")[
            -1
        ],
    )
    assert w.start_sweep() and w.worker.pulled
    n = len(script[first_steps]["step"])
    try:
        # drawn by the frames (no wake-up of their own)
        wait_until(lambda: ("main", 0, "loss_step") in w.live._curves, timeout_s=30)
        wait_until(lambda: len(w.live._curves[("main", 0, "loss_step")].yData) == n, timeout_s=30)
    finally:
        hold.set()
    wait_until(lambda: not w.running and not w.refresher.active, timeout_s=30)
    assert w.worker._pending == []
    w.close()


def test_on_a_loaded_machine_the_status_bar_still_moves_every_frame(harness):
    # Seen with the machine loaded: 8.5 s into a sweep the status bar still read "step 1", 0%, "ETA --" while
    # Loss vs step showed ~157 steps: each plot took so long to draw that the next frame began before the last
    # plot of this one, and the status bar waited for a frame whose plots all drew
    h = harness(always_new=True)
    slow = h.plots.update_plot

    def slow_draw(plot_id: str, budget_s: float | None = None) -> bool:
        h.clocks.wall += 0.45  # seconds a plot takes to draw on a loaded machine
        return slow(plot_id, budget_s)

    h.plots.update_plot = slow_draw
    h.refresher.start()
    h.run(seconds=8.0)
    assert len(h.plots.snapshots) >= 4
    assert len(h.status) >= len(h.plots.snapshots) - 1  # once a frame, though no frame drew every plot
    for plot_id in FakePlots.plot_ids:  # and no plot waits forever behind the first ones
        assert len(h.plots.times(plot_id)) >= 4, plot_id
