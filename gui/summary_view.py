"""The sweep summary: final loss, total time, throughput and peak memory against batch size.

One point per finished run, a line through the mean over seeds of the runs that ended ok with,
where a batch size ran with several seeds, a band from their min to their max (core/aggregate.py,
the aggregation of the CLI's per-batch-size table), and a labelled marker for every run that ran
out of memory, diverged, crashed or stopped.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from batchlab.core.aggregate import Spread, aggregate_by_batch
from batchlab.core.analysis.time_account import TimeAccount, sweep_accounts
from batchlab.core.model import RunData, SweepData
from batchlab.gui.plot_axes import make_plot
from batchlab.gui.plot_style import (
    MIB,
    PLOT_COLOURS,
    STATUS_MARKS,
    BatchColours,
    ZeroAnchor,
    lay_out_grid,
    remove_items,
    run_brush,
    run_pen,
    sync_legend,
    text_colour,
)
from batchlab.gui.refresh import RunChangeView
from batchlab.gui.time_account_bars import TimeAccountBars
from PySide6.QtWidgets import QWidget

METRICS = {
    # metric id -> title, y label, y units
    "final_loss": ("Final loss", "loss", None),
    "total_time": ("Total training time", "time", "s"),
    "throughput": ("Steady throughput", "", "samples/s"),  # the title names it; the axis its unit
    "peak_memory": ("Peak memory", "memory", "MiB"),
}
# The run figure (core.figures.RunFigures) behind each metric, for the aggregation over seeds
METRIC_FIGURES = {
    "final_loss": "final_loss",
    "total_time": "total_time",
    "throughput": "samples_per_s",
    "peak_memory": "peak_memory_bytes",
}
BAND_ALPHA = 60  # of 255: the min-max band behind the points
# Amounts whose axis starts at zero, so a difference looks as large as it is
FROM_ZERO = ("total_time", "throughput", "peak_memory")
# Smallest y span of an axis, relative to its values: one run (or equal ones) still gets tick labels
MIN_RELATIVE_SPAN = 0.1


def metric_value(run: RunData, metric: str) -> float:
    """The run's value for a summary metric (NaN when it has none); the figures come from the core model."""
    figures = run.figures
    if metric == "final_loss":
        return figures.final_loss
    if metric == "total_time":
        return figures.total_time
    if metric == "throughput":
        return figures.samples_per_s
    peak = figures.peak_memory_bytes
    return peak / MIB if peak > 0 else math.nan


@dataclass(frozen=True)
class RunPoint:
    """One ended run as the summary draws it: its status and its value per metric (NaN: none)."""

    index: int
    batch_size: int
    status: str
    message: str
    values: dict[str, float]


@dataclass(frozen=True)
class SourceFigures:
    """One sweep's summary figures: its ended runs, per metric the mean and min-max over seeds per batch size of the
    ok runs (core/aggregate.py), the peak memory's sources and the runs' time accounts (core/analysis/time_account)."""

    label: str
    runs: list[RunPoint]
    groups: dict[str, list[tuple[int, Spread]]]  # metric -> (batch size, spread of its ok runs' values)
    memory_sources: set[str]
    accounts: list[TimeAccount] = field(default_factory=list)


def summary_figures(sources: dict[str, SweepData]) -> dict[str, SourceFigures]:
    """Every number the Summary tab shows, from the sweeps alone (no Qt: the window computes it in a worker thread
    for a file, on the GUI thread for a live sweep; the same function either way)."""
    out = {}
    for source, data in sources.items():
        ended = [r for r in data.ordered_runs() if r.status not in ("pending", "running")]
        runs = [
            RunPoint(r.index, r.batch_size, r.status, r.message, {m: metric_value(r, m) for m in METRICS})
            for r in ended
        ]
        groups = {}
        for metric, figure in METRIC_FIGURES.items():
            scale = MIB if metric == "peak_memory" else 1.0
            rows = [
                {"batch_size": r.batch_size, "seed": r.seed, "status": r.status, figure: getattr(r.figures, figure)}
                for r in ended
            ]
            groups[metric] = [
                (g["batch_size"], _scaled(g[figure], scale)) for g in aggregate_by_batch(rows, (figure,)) if g[figure].n
            ]
        memory = {r.figures.peak_memory_source for r in data.runs.values() if r.figures.peak_memory_source}
        out[source] = SourceFigures(data.label, runs, groups, memory, sweep_accounts(data.ordered_runs()))
    return out


def _scaled(value: Spread, scale: float) -> Spread:
    return Spread(value.mean / scale, value.low / scale, value.high / scale, value.n)


class SummaryView(RunChangeView):
    """Four plots against batch size (log2 x axis); `refresh()` redraws when a run has ended."""

    def __init__(self, colours: BatchColours, parent: QWidget | None = None):
        super().__init__(parent)
        self.colours = colours
        self.plots: dict[str, pg.PlotWidget] = {}
        for metric, (title, yl, yu) in METRICS.items():
            widget = make_plot(title, "batch size", None, yl, yu, log2_x=True)
            widget.getPlotItem().getViewBox().setDefaultPadding(0.08)  # markers at the ends stay whole
            if metric in FROM_ZERO:
                widget.getPlotItem().addItem(ZeroAnchor())
            self.plots[metric] = widget
        lay_out_grid(self, self.plots, columns=2)
        # one stacked bar per run (core/analysis/time_account), redrawn with the plots; the window shows its widget
        # in a tab under them (main_window.why_tabs)
        self.time_bars = TimeAccountBars()
        self.sources: dict[str, SweepData] = {}
        self.selection: set[tuple[str, int]] = set()
        self._items: dict[str, list[pg.GraphicsObject]] = defaultdict(list)
        self.marks: list[tuple[str, str, int, str]] = []  # (metric, source, run index, label) for tests

    def set_source(self, source: str, data: SweepData | None) -> None:
        if data is None:
            self.sources.pop(source, None)
        else:
            self.sources[source] = data
        self.invalidate_when_shown()  # hidden, it draws when shown (a 500-run file's Summary took 1.4 s)

    def set_selection(self, keys: set[tuple[str, int]]) -> None:
        if set(keys) == self.selection:  # the runs table repeats it after each reset of its model
            return
        self.selection = set(keys)
        self.invalidate_when_shown()  # hidden, it redraws when shown (4 s of a 500-run file's selection)

    def restyle(self) -> None:
        self.invalidate_when_shown()  # new colours (e.g. a sweep's batch sizes as it starts): hidden, when shown

    def data_version(self) -> object:
        return {s: d.summary_version for s, d in self.sources.items()}

    def data_ids(self) -> object:
        return {s: id(d) for s, d in self.sources.items()}

    def figures_job(self) -> Callable[[], dict[str, SourceFigures]]:
        sources = dict(self.sources)
        return lambda: summary_figures(sources)

    def show_computing(self) -> None:
        """While the worker computes the figures: no plot shows the last data's, the time split says it computes."""
        for metric, widget in self.plots.items():
            remove_items(widget.getPlotItem(), self._items[metric])
            sync_legend(widget.getPlotItem())
            widget.getPlotItem().setTitle(f"{METRICS[metric][0]} (computing…)")
        self.marks = []
        runs = sum(len(d.runs) for d in self.sources.values())
        self.time_bars.show_computing(f"Computing the summary of {runs:,} runs…")

    def draw(self, figures: dict[str, SourceFigures]) -> None:
        """Every plot again from the figures (RunChangeView calls it when a run started or ended, or the looks
        changed: a selection, the colours)."""
        for step in self.draw_steps(figures):
            step()

    def draw_steps(self, figures: dict[str, SourceFigures]) -> list[Callable[[], None]]:
        """draw() in five parts, each whole (a plot, then the time split): the window draws a file's summary a part
        per turn of the event loop (all at once was ~0.1 s of the GUI thread at 500 runs)."""
        self.marks = []
        steps: list[Callable[[], None]] = [lambda metric=m: self._draw_plot(metric, figures) for m in self.plots]
        steps.append(lambda: self._draw_rest(figures))
        return steps

    def _draw_plot(self, metric: str, figures: dict[str, SourceFigures]) -> None:
        plot = self.plots[metric].getPlotItem()
        remove_items(plot, self._items[metric])
        if plot.titleLabel.text != METRICS[metric][0]:  # (set only when changed: a new title re-lays out the plot)
            plot.setTitle(METRICS[metric][0])
        self.marks = [m for m in self.marks if m[0] != metric]
        for source, figs in figures.items():
            self._draw_metric(plot, metric, source, figs, several=len(figures) > 1)
        self._widen_flat_range(plot, metric)
        sync_legend(plot)

    def _draw_rest(self, figures: dict[str, SourceFigures]) -> None:
        self._label_memory(figures)
        self.time_bars.draw_accounts([(s, a) for s, f in figures.items() for a in f.accounts])

    def _label_memory(self, figures: dict[str, SourceFigures]) -> None:
        """Where every run's peak memory is host RSS (CPU runs), the axis says so: the whole process's RSS."""
        sources = set().union(*(f.memory_sources for f in figures.values()))
        label = "process RSS peak" if sources == {"rss_peak_bytes"} else "memory"
        self.plots["peak_memory"].getPlotItem().setLabel("left", label, units="MiB")

    def _widen_flat_range(self, plot: pg.PlotItem, metric: str) -> None:
        """Give the y axis a span of at least MIN_RELATIVE_SPAN of its values (else one run gets no tick labels)."""
        ys = [item.data["y"] for item in self._items[metric] if isinstance(item, pg.ScatterPlotItem)]
        values = np.concatenate(ys) if ys else np.array([])
        values = values[np.isfinite(values)]
        view = plot.getViewBox()
        if not len(values):
            return
        lo, hi = float(values.min()), float(values.max())
        if metric in FROM_ZERO:
            lo = min(lo, 0.0)
        span = max(hi - lo, MIN_RELATIVE_SPAN * max(abs(lo), abs(hi)), 1e-12)
        if hi - lo < span:
            middle = (lo + hi) / 2
            view.setYRange(middle - span / 2, middle + span / 2)
        else:
            view.enableAutoRange(axis=pg.ViewBox.YAxis)

    def _draw_metric(self, plot: pg.PlotItem, metric: str, source: str, figs: SourceFigures, several: bool) -> None:
        """One scatter of the ended runs (points share a pen and brush per look: cheap for 500 runs), a labelled
        mark for each that did not end ok, the mean and band over seeds."""
        if not figs.runs:
            return
        compare = source == "compare"
        spots = _Spots()
        failed = []
        for run in figs.runs:
            value = run.values[metric]
            key = (source, run.index)
            dimmed = bool(self.selection) and key not in self.selection
            colour = self.colours.colour(run.batch_size)
            x = math.log2(run.batch_size)
            if run.status == "ok" and math.isfinite(value):
                selected = key in self.selection
                pen = run_pen(colour, compare=compare, dimmed=dimmed, highlighted=selected)
                spots.add(x, value, pen, run_brush(colour, dimmed=dimmed), "o", 11 if selected else 8, key)
            elif run.status in STATUS_MARKS:
                failed.append((run, x, value, colour, dimmed))
        for run, x, value, colour, dimmed in failed:
            symbol, label = STATUS_MARKS[run.status]
            # At the run's own value; a run without one (stopped before it was measured) on the axis
            # of an amount (0) or without a point, never at another run's value.
            if math.isfinite(value):
                y = value
            elif metric in FROM_ZERO:
                y, label = 0.0, f"{label} (no value)"
            else:
                self.marks.append((metric, source, run.index, f"{label} (no value)"))
                continue
            pen = run_pen(colour, compare=compare, dimmed=dimmed, highlighted=False)
            spots.add(x, y, pen, run_brush(colour, dimmed=dimmed), symbol, 14, (source, run.index))
            text = pg.TextItem(label, color=text_colour(pen.color()), anchor=(0.5, 1.3))
            text.setPos(x, y)
            text.setToolTip(run.message)
            self._add(plot, metric, text)
            self.marks.append((metric, source, run.index, label))
        if figs.groups[metric]:
            self._draw_mean_and_band(plot, metric, source, figs, several)
        scatter = pg.ScatterPlotItem(hoverable=True, tip=_tip)
        spots.set_on(scatter)
        self._add(plot, metric, scatter)

    def _draw_mean_and_band(self, plot: pg.PlotItem, metric: str, source: str, figs: SourceFigures, several: bool):
        """The mean over seeds per batch size as a grey line; where a batch size has several seeds, a band
        from their min to their max, and the legend says so ("mean, band = min-max over 3 seeds")."""
        groups = figs.groups[metric]
        x = np.log2([b for b, _ in groups])
        mean, low, high = (np.array([getattr(g, f) for _, g in groups]) for f in ("mean", "low", "high"))
        seeds = sorted({g.n for _, g in groups})
        compare = source == "compare"
        style = pg.QtCore.Qt.PenStyle.DashLine if compare else None
        line_pen = pg.mkPen(PLOT_COLOURS["neutral"], width=1.2, style=style)
        name = None
        if seeds[-1] > 1:
            counted = f"{seeds[-1]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
            name = f"mean, band = min-max over {counted} seeds"
            band = pg.FillBetweenItem(
                pg.PlotDataItem(x, low), pg.PlotDataItem(x, high), brush=_band_brush(compare), pen=None
            )
            band.setZValue(-10)
            band.band = (x, low, high)
            self._add(plot, metric, band)
        elif several:
            name = "mean over seeds"
        if name and several:  # two sweeps overlaid: the dashed line is the comparison
            name = f"{figs.label or source}: {name}"
        line = pg.PlotDataItem(x, mean, pen=line_pen, name=name)
        self._add(plot, metric, line)

    def bands(self, metric: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(x = log2 batch, low, high) of each min-max band drawn in a metric's plot (for tests)."""
        return [i.band for i in self._items[metric] if isinstance(i, pg.FillBetweenItem)]

    def _add(self, plot: pg.PlotItem, metric: str, item: pg.GraphicsObject) -> None:
        plot.addItem(item)
        self._items[metric].append(item)

    def point_count(self, metric: str) -> int:
        """Number of run markers (ok and failed) drawn in a metric's plot."""
        return sum(len(i.points()) for i in self._items[metric] if isinstance(i, pg.ScatterPlotItem))


def _band_brush(compare: bool) -> pg.QtGui.QBrush:
    c = pg.mkColor(PLOT_COLOURS["neutral"])
    c.setAlpha(BAND_ALPHA // 2 if compare else BAND_ALPHA)
    return pg.mkBrush(c)


def _tip(x: float, y: float, data) -> str:
    return f"batch {2.0**x:g}: {y:.4g}"


class _Spots:
    """A scatter's points as columns (one setData: pyqtgraph's per-spot dicts cost ~1 ms a point at 500 runs)."""

    def __init__(self) -> None:
        self.x: list[float] = []
        self.y: list[float] = []
        self.pen: list = []
        self.brush: list = []
        self.symbol: list[str] = []
        self.size: list[float] = []
        self.keys: list[tuple[str, int]] = []

    def add(self, x: float, y: float, pen, brush, symbol: str, size: float, key: tuple[str, int]) -> None:
        self.x.append(x)
        self.y.append(y)
        self.pen.append(pen)
        self.brush.append(brush)
        self.symbol.append(symbol)
        self.size.append(size)
        self.keys.append(key)

    def set_on(self, scatter: pg.ScatterPlotItem) -> None:
        data = np.empty(len(self.keys), dtype=object)
        data[:] = self.keys
        scatter.setData(
            x=np.array(self.x, dtype=float),
            y=np.array(self.y, dtype=float),
            pen=self.pen,
            brush=self.brush,
            symbol=self.symbol,
            size=self.size,
            data=data,
        )
