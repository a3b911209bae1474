"""The live plots: loss against step (or examples seen, or time), time and epoch; epoch time split; throughput; memory.

Curves are created once per run and updated with setData. What a plot draws is a snapshot of
the sweep taken by the window's Refresher at the start of each frame (`take_snapshot`), so every
plot and the status bar show the same run and epoch. Step curves go through a `StepEnvelope`
(gui/step_envelope.py): an update costs the new rows and at most a few thousand points, however
long the run. Only the visible tab is drawn; a hidden one catches up when it is shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from batchlab.core.figures import RunningEpoch
from batchlab.core.model import RunData, SweepData
from batchlab.gui import memory_plot
from batchlab.gui.batch_marks import BatchMarks
from batchlab.gui.epoch_bars import EpochBars
from batchlab.gui.eval_marks import EvalMarks
from batchlab.gui.finished_curves import KEEP_OWN, FinishedCurves
from batchlab.gui.live_curves import LiveCurves
from batchlab.gui.live_marks import LiveMarks
from batchlab.gui.live_series import (
    EVAL_PLOTS,
    LOSS_X,
    PLOT_ORDER,
    PLOT_TABLE,
    PLOTS,
    SERIES,
    STYLE_LEGEND,
    RunKey,
    examples_seen,
)
from batchlab.gui.live_status import SweepPosition
from batchlab.gui.memory_plot import MEMORY_SERIES, RSS_BASE
from batchlab.gui.planned_range import planned_epochs, planned_x
from batchlab.gui.plot_axes import make_plot
from batchlab.gui.plot_style import (
    BatchColours,
    ZeroAnchor,
    lay_out_grid,
    sync_legend,
)
from batchlab.gui.refresh import PlotPacer
from batchlab.gui.running_epoch_marks import FOLLOW_STEPS, PROVISIONAL, RunningEpochMarks
from batchlab.gui.settled_plots import SettledPlots
from batchlab.gui.step_envelope import StepEnvelope
from batchlab.gui.sticky_view import StickyViewBox
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget


class LivePlots(SettledPlots, LiveCurves, LiveMarks, QWidget):
    """Six plots in a grid, one curve per run and series; the Refresher brings them to its snapshots."""

    plot_ids = PLOT_ORDER

    def __init__(
        self,
        colours: BatchColours,
        pacer: PlotPacer | None = None,
        parent: QWidget | None = None,
        clock: Callable[[], float] = time.monotonic,
        live: Callable[[], bool] = lambda: False,
    ):
        super().__init__(parent)
        self.colours = colours
        self.live = live  # True while data arrives (the window's Refresher ticks): the plots' ranges are sticky
        self.pacer = pacer if pacer is not None else PlotPacer()  # the window passes its Refresher's
        self.plots: dict[str, pg.PlotWidget] = {
            plot_id: make_plot(
                title,
                xl,
                xu,
                yl,
                yu,
                log2_x=plot_id == "epoch_split",
                many_points=PLOT_TABLE[plot_id] == "steps",
                view_box=StickyViewBox(),
            )
            for plot_id, (title, xl, xu, yl, yu) in PLOTS.items()
        }
        for widget in self.plots.values():
            # Qt widens every repainted rect by 2 px for antialiased edges, so a repaint of the view took in
            # the axes' tick labels next to it (see plot_axes.Axis); items here keep inside their bounds.
            widget.setOptimizationFlag(widget.OptimizationFlag.DontAdjustForAntialiasing, True)
        for plot_id in ("epoch_split", "throughput", "memory"):
            anchor = ZeroAnchor()
            self.plots[plot_id].getPlotItem().addItem(anchor)
        self._memory_zero = anchor  # hidden while RSS baselines are drawn (see _label_memory)
        self._build_layout()
        self.init_settled()
        self.sources: dict[str, SweepData] = {}
        self.loss_x = "step"
        self.log_x = False
        self._curves: dict[tuple[str, int, str], pg.PlotDataItem] = {}
        self._curve_content: dict[tuple[str, int, str], tuple] = {}  # (source, run, series) -> what it shows
        self._drawn = {}  # (source, run, plot) -> (rows, status) drawn (gui/settled_plots.py)
        self._envelopes: dict[RunKey, StepEnvelope] = {}
        self.running = RunningEpochMarks(self.plots, colours)  # the running epoch's hollow markers
        self._snapshot: dict[RunKey, tuple[int, int, int]] = {}  # rows of (steps, epochs, evals) to draw
        self.position = SweepPosition(clock)  # what the main sweep was doing at the last snapshot, and since when
        # (plot, source, batch size) -> its legend entry's sample: legend only, so a run's curve can go (see below)
        self._batch_legend: dict[tuple[str, str, int], pg.PlotDataItem] = {}
        # Runs that ended long ago are drawn by their batch size's group curve (gui/finished_curves.py)
        self.finished = FinishedCurves()
        self._recent: dict[str, set[int]] = {}  # source -> the ended runs that keep their own curves
        # source -> the runs that had ended before the last KEEP_OWN at the snapshot: drawn by their group. Taken
        # at the snapshot, so a run that ends between it and a plot's draw keeps its own curve.
        self._old: dict[str, set[int]] = {}
        self._style_named: dict[str, pg.PlotDataItem] = {}  # series -> its grey legend sample
        self._memory_label = ""
        self._expected_memory: set[str] = set()  # memory columns the live main sweep will draw (see _prepare)
        self._prepared: set[str] = set()  # plots prepared for the main sweep (see _prepare)
        self.bars = EpochBars(self.plots["epoch_split"].getPlotItem(), colours)
        self.evals = EvalMarks()
        self.batch_marks = BatchMarks()
        self._bars_drawn: set[str] = set()  # sources whose bars were drawn
        self.selection: set[RunKey] = set()
        self.restyle_due: set[str] = set()  # plots whose curves take the current looks when next drawn (restyle)
        self.set_points: dict[str, int] = {}  # plot id -> points handed to setData by its last update (tests)
        self.unfinished: set[str] = set()  # plots whose last update ran out of its time budget (runs left to draw)
        # Called when the tab is shown; True if it will draw what is due itself (MainWindow: the refresher's ticks)
        self.on_shown: Callable[[], bool] | None = None
        # Called after a restyle (a selection): True if the window's refresher draws what changed, a plot per tick
        self.draw_in_slices: Callable[[], bool] | None = None
        # True for a sweep run here (the window says which): its last runs keep their own curves once it ended too
        self.ran_here: Callable[[SweepData], bool] = lambda data: True

    def _build_layout(self) -> None:
        self.x_choice = QComboBox()
        for key, (text, *_rest) in LOSS_X.items():
            self.x_choice.addItem(text, key)
        self.x_choice.setToolTip("x axis of the first loss plot: examples seen compares batch sizes fairly")
        self.log_box = QCheckBox("log x")
        self.log_box.setToolTip("logarithmic x axis for both loss-per-step plots")
        self.x_choice.currentIndexChanged.connect(lambda _i: self.set_loss_x(self.x_choice.currentData()))
        self.log_box.toggled.connect(lambda on: self.set_loss_x(self.loss_x, on))
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 0, 4, 0)
        bar.addWidget(QLabel("Loss x axis:"))
        bar.addWidget(self.x_choice)
        bar.addWidget(self.log_box)
        bar.addStretch(1)
        grid = QWidget()
        lay_out_grid(grid, self.plots, columns=3)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 2, 0, 0)
        outer.setSpacing(0)
        outer.addLayout(bar)
        outer.addWidget(grid, 1)

    # ------------------------------------------------------------ sources and axes

    def set_source(self, source: str, data: SweepData | None, draw: bool = True) -> None:
        """Show this sweep as `source` ("main" or "compare"), replacing what was there; with draw=False the
        plots are drawn by the refresher's ticks (a slice of runs each: a 500-run file took 1.7 s at once)."""
        for key in [k for k in self._curves if k[0] == source]:
            self._drop_curve(key)
        self.finished.remove_source(source, self._remove_item)
        for key in [k for k in self._batch_legend if k[1] == source]:
            self.plots[key[0]].getPlotItem().legend.removeItem(self._batch_legend.pop(key))
        self._recent.pop(source, None)
        self._old.pop(source, None)
        self.running.remove(source)
        self.bars.remove(source)
        self.evals.remove(self.plots, source)
        self.batch_marks.remove(self.plots, source)
        self._drawn = {k: v for k, v in self._drawn.items() if k[0] != source}
        self._curve_content = {k: v for k, v in self._curve_content.items() if k[0] != source}
        self._envelopes = {k: v for k, v in self._envelopes.items() if k[0] != source}
        self._bars_drawn.discard(source)
        if source == "main":
            self._expected_memory, self._prepared = set(), set()
        if data is None:
            self.sources.pop(source, None)
        else:
            self.sources[source] = data
        for plot in self.plots.values():
            sync_legend(plot.getPlotItem())
        if draw:
            self.refresh()
        else:
            self.take_snapshot()

    def set_loss_x(self, loss_x: str, log_x: bool | None = None) -> None:
        """Plot loss against "step", "examples" or "wall_time" in the first loss plot; log_x for both step plots."""
        if loss_x not in LOSS_X:
            raise ValueError(f"loss x axis must be one of {', '.join(LOSS_X)}, got {loss_x!r}")
        self.loss_x = loss_x
        self.log_x = self.log_x if log_x is None else bool(log_x)
        for widget, value in ((self.x_choice, list(LOSS_X).index(loss_x)), (self.log_box, self.log_x)):
            widget.blockSignals(True)
            widget.setCurrentIndex(value) if widget is self.x_choice else widget.setChecked(value)
            widget.blockSignals(False)
        _text, title, label, units = LOSS_X[loss_x]
        item = self.plots["loss_step"].getPlotItem()
        # Until the auto-range below, an axis reads the old range in the new mode (a linear range as
        # exponents): pyqtgraph's overflow there is harmless and gone once the range is set.
        with np.errstate(over="ignore"):
            item.setTitle(title)
            item.setLabel("bottom", label, units=units)
            for plot_id in ("loss_step", "loss_time"):
                self.plots[plot_id].getPlotItem().setLogMode(x=self.log_x, y=False)
                self._drawn = {k: v for k, v in self._drawn.items() if k[2] != plot_id}
                self.update_plot(plot_id)
                view = self.plots[plot_id].getPlotItem().getViewBox()
                view.enableAutoRange()
                view.updateAutoRange()

    # ------------------------------------------------------------ snapshots and drawing

    def take_snapshot(self) -> None:
        """Note how many rows each run has now: the plots and status_text() show this moment until the next."""
        snapshot = {
            (source, run.index): (len(run.steps), len(run.epochs), len(run.evals))
            for source, data in self.sources.items()
            for run in data.runs.values()
        }
        self.note_snapshot(snapshot, {(s, r.index): r.status for s, d in self.sources.items() for r in d.runs.values()})
        self._snapshot = snapshot
        self.position.note(self.sources.get("main"), self._main_steps)
        for source, data in self.sources.items():
            ended = [i for i, run in data.runs.items() if run.status not in ("pending", "running")]
            # A sweep being run or written keeps its last runs' own curves; a file opened whole (more runs than that)
            # draws every run in its group: ~230 items fewer at 500 runs, whose paints were most of a repaint.
            keep = KEEP_OWN if data.status == "running" or self.ran_here(data) or len(ended) <= KEEP_OWN else 0
            recent = set(sorted(ended)[-keep:]) if keep else set()
            left = self._recent.get(source, set()) - recent
            self._recent[source] = recent
            self._old[source] = set(ended) - recent
            if left:  # now long ago: drawn again, into their groups
                self._forget_drawn({(source, index) for index in left})

    def _forget_drawn(self, keys: set[RunKey]) -> None:
        """These runs are drawn again in every plot at its next update (own curve or group changes)."""
        self._drawn = {k: v for k, v in self._drawn.items() if k[:2] not in keys}
        self._curve_content = {k: v for k, v in self._curve_content.items() if k[:2] not in keys}

    def _in_group(self, source: str, run: RunData) -> bool:
        """True where a run is drawn by its batch size's group curve: ended, not recent, not selected."""
        return run.index in self._old.get(source, ()) and (source, run.index) not in self.selection

    def _rows(self, source: str, run: RunData, table: str) -> int:
        steps, epochs, evals = self._snapshot.get((source, run.index), (0, 0, 0))
        return {"steps": steps, "epochs": epochs, "evals": evals}[table]

    def refresh(self) -> None:
        """Take a snapshot and redraw every plot whose runs changed (a new source, selection or axis)."""
        self.take_snapshot()
        self.pacer.draw(self.plot_ids, self.update_plot)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if self.on_shown is not None and self.on_shown():  # the window's refresher draws it, a slice per tick
            return
        self.pacer.draw(self.plot_ids, self.update_plot)  # what arrived while another tab showed

    def has_pending(self) -> bool:
        """True while some plot has not drawn the current snapshot (or the current looks) yet."""
        if self.restyle_due:
            return True
        sticky = bool(self.live())
        for plot_id in PLOT_ORDER:
            if self.is_settled(plot_id, sticky):
                continue
            for source, data in self.sources.items():
                for run in data.runs.values():
                    if self._drawn.get((source, run.index, plot_id)) != self._state(source, run, plot_id):
                        return True
        return False

    def _state(self, source: str, run: RunData, plot_id: str) -> tuple:
        """What a plot shows of a run: its rows in the snapshot and its status; the step rows too where
        a provisional point follows the running epoch's steps."""
        state = (self._rows(source, run, PLOT_TABLE[plot_id]), run.status)
        if plot_id in FOLLOW_STEPS and run.status == "running":
            state += (self._rows(source, run, "steps"),)
        if plot_id in EVAL_PLOTS:
            state += (self._rows(source, run, "evals"),)
        return state

    def update_plot(self, plot_id: str, budget_s: float | None = None) -> bool:
        """Bring one plot to the snapshot; True if anything visible changed (then Qt repaints it).

        A hidden tab is not drawn (nothing is marked drawn, so it catches up when shown). With `budget_s`
        the runs are drawn until that much time went (the runs left are drawn by the next call; the plot
        is then in `unfinished`): a file of hundreds of runs is drawn a slice per refresh tick.
        """
        self.unfinished.discard(plot_id)
        if not self.isVisible():
            return False
        sticky = bool(self.live())
        if self.is_settled(plot_id, sticky):  # drawn up to date, and nothing changed since: O(1), not O(runs)
            return False
        settle_key = self.settle_key(sticky)
        deadline = None if budget_s is None else time.perf_counter() + budget_s
        runs_drawn = 0  # at least one run per call, whatever the budget: every call makes progress
        restyled = self._restyle_plot(plot_id)  # new looks only: repainted, no new range
        changed = self._prepare(plot_id)
        self.set_points[plot_id] = 0
        item = self.plots[plot_id].getPlotItem()
        view = item.getViewBox()
        # While data arrives the range moves only when the data leaves it (gui/axis_range.py): the axes are
        # not regenerated every frame. Once the sweep is over, the plot fits its data exactly again.
        refit = view.sticky != sticky
        for source, data in self.sources.items():
            runs_changed = False
            for run in data.ordered_runs():
                key = (source, run.index, plot_id)
                state = self._state(source, run, plot_id)
                if self._drawn.get(key) == state:
                    continue
                sliced = deadline is not None and runs_drawn and plot_id != "epoch_split"
                if sliced and self.slice_full(plot_id, runs_drawn, deadline):
                    self.unfinished.add(plot_id)
                    break
                runs_drawn += 1
                self._drawn[key] = state
                if plot_id == "epoch_split":
                    # a run without epochs has no bar, unless its first epoch is running (or just stopped)
                    runs_changed = (
                        runs_changed or bool(state[0]) or len(state) > 2 or (source, run.index) in self.bars.running
                    )
                else:
                    runs_changed = self._draw_run(source, run, plot_id) or runs_changed
            # (at the sweep's end too: the running bar's legend entry, kept while it was live, goes)
            if plot_id == "epoch_split" and (runs_changed or refit or source not in self._bars_drawn):
                rows = lambda run, source=source: self._rows(source, run, "epochs")  # noqa: E731
                running = {
                    run.index: figures
                    for run in data.ordered_runs()
                    if (figures := self._running_epoch(source, run)) is not None
                }
                # the running bar's legend entry stays while the sweep is live, between runs too: taken out and
                # put back at each run's start it re-laid out the plot (both axes redrawn) twice a run
                keep = sticky or any(r.status == "running" for d in self.sources.values() for r in d.runs.values())
                drawn = self.bars.draw(source, data, list(self.sources), rows, self.selection, running, keep)
                runs_changed = drawn or source not in self._bars_drawn
                self._bars_drawn.add(source)
            changed = changed or runs_changed
        if plot_id != "epoch_split":
            series = {name for name, spec in SERIES.items() if spec[0] == plot_id}
            flush_start = time.perf_counter()
            points = self.finished.flush(series, self._group_item, self._remove_item)
            self.note_flush(plot_id, runs_drawn, time.perf_counter() - flush_start)
            self.set_points[plot_id] = self.set_points.get(plot_id, 0) + points
            changed = changed or bool(points)
        view.sticky = sticky
        if PLOT_TABLE[plot_id] == "epochs" and plot_id != "epoch_split":
            view.x_upper = self.per_snapshot("epochs", lambda: planned_epochs(self.sources))  # no tick past the plan
        elif plot_id in ("loss_step", "loss_time"):
            # The x range goes straight to the planned end of the runs shown and stays there while they train:
            # growing with headroom, it changed (both axes' text and the grid redrawn) ~10 times a run.
            x_axis = self.loss_x if plot_id == "loss_step" else "wall_time"
            view.x_upper = self.per_snapshot(x_axis, lambda: planned_x(self.sources, self._rows, x_axis))
        if changed:
            sync_legend(item)
        if changed or refit:
            # Settle the auto-range and the view's transform now: left to the paint, they change the axes and
            # the grid from inside it, and Qt paints the plot a second time.
            view.updateAutoRange()
            view.updateMatrix()
        self.mark_settled(plot_id, settle_key)
        return changed or refit or restyled  # a refit to the data when the sweep ends changes the range shown

    def _prepare(self, plot_id: str) -> bool:
        """Make what a live sweep will need in this plot once its device is known, before any run trains:
        the style legend's samples, and on a CPU the memory axis's "process RSS" label. Made inside the
        first finished epoch they were the sweep's longest GUI stall (57.7 ms, a quiet machine); here each
        plot's share comes in its own tick of a frame while the sweep starts. True if the plot changed."""
        data = self.sources.get("main")
        if data is None or data.status != "running" or plot_id in self._prepared:
            return False
        runs = list(data.runs.values())
        if not runs:  # the sweep has not started yet: its device is not known
            return False
        self._prepared.add(plot_id)
        expected = memory_plot.expected_columns(data.spec, data.environment, runs)
        changed = False
        for series, (series_plot, _x, y_col, _t, _symbol, _style) in SERIES.items():
            if series_plot != plot_id or series not in STYLE_LEGEND or series in self._style_named:
                continue
            if plot_id == "memory" and y_col not in expected:
                continue
            self._add_style_legend(series)
            changed = True
        if plot_id == "memory" and expected:
            self._expected_memory = expected
            changed = self._label_memory() or changed
        return changed

    def _draw_run(self, source: str, run: RunData, only_plot: str) -> bool:
        """Set this run's curves in one plot; True if that shows: new data or a new legend entry.

        An empty curve made ahead of its data changes nothing on screen, so it costs no repaint.
        """
        legend = self.plots[only_plot].getPlotItem().legend
        entries = len(legend.items)
        shown = False
        for series, (plot_id, x_col, y_col, table, symbol, style) in SERIES.items():
            if plot_id != only_plot:
                continue
            n = self._rows(source, run, table)
            if not n:
                # Create a starting run's curves before its data arrives, while the child is still
                # loading TensorFlow, so the first data costs only a setData.
                # Memory curves only where the device says which will have data (on a CPU: RSS and its baseline).
                if run.status == "running" and (
                    y_col not in (*MEMORY_SERIES, RSS_BASE) or (source == "main" and y_col in self._expected_memory)
                ):
                    self._curve(source, run, series, plot_id, symbol, style)
                continue
            x_axis = self.loss_x if x_col == "loss_x" else x_col
            # What the curve is to show; a plot that follows the running epoch comes here every frame, while
            # its epoch curves change only at an epoch's end: those are not set again (a setData costs ~2 ms).
            content = (n, x_axis, self.log_x, run.attrs.get(RSS_BASE) if y_col == RSS_BASE else None)
            key = (source, run.index, series)
            grouped = self._in_group(source, run)
            group = (source, series, run.batch_size)
            drawn = self.finished.has(group, run.index) if grouped else key in self._curves
            if drawn and self._curve_content.get(key) == content:
                continue
            self._curve_content[key] = content
            if table == "steps":
                x, y = self._step_curve(source, run, n, x_axis)
            elif y_col == RSS_BASE or y_col in MEMORY_SERIES:
                line = memory_plot.baseline(run, n) if y_col == RSS_BASE else memory_plot.epoch_memory(run, y_col, n)
                if line is None:
                    continue
                x, y = line
            else:
                x = np.asarray(run.epochs["epoch"][:n], dtype=float) + 1
                y = np.asarray(run.epochs[y_col][:n], dtype=float)
            shown = True
            if grouped:  # its points go to the group's curve (drawn once per update, see update_plot)
                self._drop_curve(key)
                self.finished.put(group, run.index, x, y, thin=table == "steps")
                if table == "steps" and self._rows(source, run, "steps") and plot_id == "loss_time":
                    self._envelopes.pop((source, run.index), None)  # both step plots have its points now
                continue
            self.finished.discard(group, run.index)
            curve = self._curve(source, run, series, plot_id, symbol, style)
            curve.setData(x, y, connect="finite")
            self.set_points[plot_id] = self.set_points.get(plot_id, 0) + len(x)
        if self._in_group(source, run):  # a curve made ahead of data that never came (a memory reading)
            for key in [k for k in self._curves if k[:2] == (source, run.index) and SERIES[k[2]][0] == only_plot]:
                self._drop_curve(key)
        if only_plot in (*PROVISIONAL, "memory"):
            dimmed = bool(self.selection) and (source, run.index) not in self.selection
            shown = self.running.draw(source, run, only_plot, self._running_epoch(source, run), dimmed) or shown
        if only_plot in EVAL_PLOTS:
            shown = self._draw_evaluations(source, run, only_plot) or shown
            shown = self._draw_batch_changes(source, run, only_plot) or shown
        if only_plot == "memory":
            shown = self._label_memory() or shown
        return shown or len(legend.items) != entries

    def _running_epoch(self, source: str, run: RunData) -> RunningEpoch | None:
        """The running epoch's figures so far in the snapshot (None when no epoch is running)."""
        return self.running.figures(source, run, self._rows(source, run, "steps"), self._rows(source, run, "epochs"))

    def provisional_point(self, source: str, index: int, plot_id: str) -> tuple[float, float] | None:
        """(x, y) of a run's running-epoch marker in a plot, None when it shows none (for tests)."""
        return self.running.point(source, index, plot_id)

    def _step_curve(self, source: str, run: RunData, n: int, x_axis: str) -> tuple[np.ndarray, np.ndarray]:
        """x, y of a run's loss-per-step curve from its envelope; NaN breaks at pauses on a time axis."""
        envelope = self._envelopes.get((source, run.index))
        if envelope is None:
            envelope = self._envelopes[(source, run.index)] = StepEnvelope()
        envelope.update(run.steps, n)
        rows, gaps = envelope.draw_rows()
        steps = run.steps
        y = np.asarray(steps["loss"][rows], dtype=float)
        if x_axis == "wall_time":
            x = np.asarray(steps["wall_time"][rows], dtype=float)
            at = np.flatnonzero(gaps)
            return np.insert(x, at, np.nan), np.insert(y, at, np.nan)
        step = np.asarray(steps["step"][rows], dtype=float)
        if x_axis == "step":
            return step + 1, y  # steps done: from 1, so a log axis can show the first
        return examples_seen(run, rows), y

    # ------------------------------------------------------------ status

    def _main_steps(self, index: int) -> int:
        return self._snapshot.get(("main", index), (0, 0, 0))[0]

    def status_text(self) -> str:
        """The main sweep's position as the plots show it (run, batch, epoch, step, loss), or its start-up state."""
        return self.position.text(self.sources.get("main"), self._main_steps)

    # ------------------------------------------------------------ selection and colours
