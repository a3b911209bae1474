"""The epoch-time-split bars of the live plots: per run, mean epoch time split into compute, input wait and other.

While a run trains, its running epoch is drawn too, as a narrower pale bar (a tint of the run's
colour) with a dashed outline over the run's bar: its time so far split the same way
(core.figures.running_epoch), growing with every refresh until the epoch ends and the finished
epochs' mean takes it in.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from batchlab.core.figures import RunningEpoch
from batchlab.core.model import RunData, SweepData
from batchlab.gui.plot_style import PLOT_COLOURS, BatchColours, run_pen, sync_legend
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPen

SEGMENTS = (("compute", "compute_time"), ("input wait", "input_wait_time"), ("other", None))
# The "other" part of an epoch: a grey with >= 3:1 contrast against both themes' plot backgrounds
# (3.1:1 on the light white, 5.2:1 on the dark #1F2023; the previous #BBBBBB was 1.9:1 on white)
OTHER_COLOUR = "#929292"
RUNNING_TINT = 0.45  # the running epoch's bar: this share of the run's colour over the plot background
RUNNING_WIDTH = 0.55  # of a bar's width: narrower, so the mean bar behind it shows at both sides
RUNNING_LEGEND = "running epoch so far"


class EpochBars:
    """Stacked bars at log2(batch size), one group per source and seed; `draw` replaces a source's bars."""

    def __init__(self, plot_item: pg.PlotItem, colours: BatchColours):
        self.plot_item = plot_item
        self.colours = colours
        self.items: dict[tuple[str, str], pg.BarGraphItem] = {}  # (source, segment or "running")
        self.samples: dict[str, pg.BarGraphItem] = {}  # segment -> its legend sample
        for seg, _ in SEGMENTS:
            self.samples[seg] = pg.BarGraphItem(x=[0], height=[1], width=1)
            plot_item.legend.addItem(self.samples[seg], seg)
        self.running_sample: pg.BarGraphItem | None = None  # added with the first running bar
        self.running: dict[tuple[str, int], tuple[float, float, float, float]] = {}  # drawn: x, compute, wait, total
        self._shown: dict[tuple[str, str], tuple] = {}  # item key -> the values it shows (unchanged: not set again)
        # (source, run, epochs) -> its segments' heights: a run's first n epoch rows never change, and taking the
        # means of every run at every draw grew with the sweep (14 ms a draw at 100 runs)
        self._heights: dict[tuple[str, int, int], tuple[float, ...]] = {}
        self.restyle_legend()
        sync_legend(plot_item)

    def restyle_legend(self) -> None:
        """Legend samples in the theme's neutral colour (again after a theme switch)."""
        grey = QColor(PLOT_COLOURS["neutral"])
        for seg, sample in self.samples.items():
            sample.setOpts(brush=segment_brush(seg, grey, False), pen=pg.mkPen(PLOT_COLOURS["foreground"]))
        if self.running_sample is not None:
            self.running_sample.setOpts(brush=_running_brush(grey), pen=_running_pen(grey))

    def forget(self) -> None:
        """Set every bar again at the next draw (the theme or the selection changed their look)."""
        self._shown.clear()

    def remove(self, source: str) -> None:
        for key in [k for k in self.items if k[0] == source]:
            self.plot_item.removeItem(self.items.pop(key))
            self._shown.pop(key, None)
        self._heights = {k: v for k, v in self._heights.items() if k[0] != source}
        self.running = {k: v for k, v in self.running.items() if k[0] != source}
        if not self.running and self.running_sample is not None:
            self.plot_item.legend.removeItem(self.running_sample)
            self.running_sample = None

    def _run_heights(self, source: str, run: RunData, n: int) -> tuple[float, ...]:
        key = (source, run.index, n)
        heights = self._heights.get(key)
        if heights is None:
            heights = self._heights[key] = _segment_heights(run, n)
            self._heights.pop((source, run.index, n - 1), None)  # the same run's bar before its last epoch
        return heights

    def draw(
        self,
        source: str,
        data: SweepData,
        sources: list[str],
        rows: Callable[[RunData], int],
        selection: set[tuple[str, int]],
        running: dict[int, RunningEpoch] | None = None,
        keep_running_legend: bool = False,
    ) -> bool:
        """Bars of this source's runs over their first rows(run) epochs (the live plots' snapshot), and
        of the running epochs in `running` (run index -> its figures so far); True if any bar changed.

        keep_running_legend: a run is still running (between two epochs, before its next steps), so the
        running bar's legend entry stays: removing and re-adding it every epoch re-lays out the plot.
        """
        runs = [r for r in data.ordered_runs() if rows(r)]
        seeds = sorted({r.seed for r in data.runs.values()}) or [0]
        n_groups = len(seeds) * max(1, len(sources))
        width = 0.8 / n_groups
        group_of_source = sorted(sources).index(source) if source in sources else 0

        def x_of(run: RunData) -> float:
            group = group_of_source * len(seeds) + seeds.index(run.seed)
            return float(np.log2(run.batch_size) - 0.4 + width * (group + 0.5))

        changed = self._draw_running(source, data, running or {}, x_of, width, selection, keep_running_legend)
        xs, bottoms, heights, colours = [], {s: [] for s, _ in SEGMENTS}, {s: [] for s, _ in SEGMENTS}, []
        colour_of: dict[int, QColor] = {}
        for run in runs:
            xs.append(x_of(run))
            if run.batch_size not in colour_of:
                colour_of[run.batch_size] = self.colours.colour(run.batch_size)
            colours.append((run, colour_of[run.batch_size]))
            bottom = 0.0
            for (seg, _col), value in zip(SEGMENTS, self._run_heights(source, run, rows(run)), strict=True):
                bottoms[seg].append(bottom)
                heights[seg].append(value)
                bottom += value
        looks = _looks(source, colours, selection)
        for seg, _ in SEGMENTS:
            key = (source, seg)
            item = self.items.get(key)
            if item is None:
                item = self.items[key] = pg.BarGraphItem(x=[], height=[], width=width)
                # the finished epochs' bars change at an epoch's end: between, Qt blits them (files.py exports
                # switch this off)
                item.setCacheMode(item.CacheMode.DeviceCoordinateCache)
                self.plot_item.addItem(item)
            if not self._differs(key, (xs, bottoms[seg], heights[seg], width, looks)):
                continue
            changed = True
            brushes, pens = [], []
            made: dict[tuple[str, bool], tuple] = {}  # one brush and pen per colour and dimming, shared by its bars
            for (_run, colour), look in zip(colours, looks, strict=True):
                if look not in made:
                    made[look] = (
                        segment_brush(seg, colour, look[1]),
                        run_pen(colour, compare=source == "compare", dimmed=look[1], highlighted=False),
                    )
                brushes.append(made[look][0])
                pens.append(made[look][1])
            item.setVisible(bool(xs))
            if not xs:  # pyqtgraph cannot take empty pen lists
                continue
            item.setOpts(
                x=np.array(xs),
                y0=np.array(bottoms[seg]),
                height=np.array(heights[seg]),
                width=width,
                brushes=brushes,
                pens=pens,
            )
        return changed

    def _differs(self, key: tuple[str, str], values: tuple) -> bool:
        """True (and remembered) when a bar item is to show other values than it shows now."""
        values = tuple(tuple(v) if isinstance(v, list) else v for v in values)
        if self._shown.get(key) == values:
            return False
        self._shown[key] = values
        return True

    def _draw_running(self, source, data, running, x_of, width, selection, keep_legend) -> bool:
        """The running epochs' see-through bars, dashed outline: compute, input wait and the rest so far."""
        runs = [data.runs[i] for i in sorted(running) if i in data.runs]
        self.running = {k: v for k, v in self.running.items() if k[0] != source}
        parts: dict[str, list] = {seg: [] for seg, _ in SEGMENTS}
        xs, colours = [], []
        for run in runs:
            figures = running[run.index]
            total = figures.elapsed_s if np.isfinite(figures.elapsed_s) else 0.0
            compute = min(max(figures.compute_s, 0.0), total) if np.isfinite(figures.compute_s) else 0.0
            wait = min(max(figures.input_wait_s, 0.0), total - compute) if np.isfinite(figures.input_wait_s) else 0.0
            for seg, value in zip(parts, (compute, wait, total - compute - wait), strict=True):
                parts[seg].append(value)
            xs.append(x_of(run))
            colours.append((run, self.colours.colour(run.batch_size)))
            self.running[(source, run.index)] = (xs[-1], compute, wait, total)
        changed = False
        looks = _looks(source, colours, selection)
        key = (source, "running")
        item = self.items.get(key)
        # One item holds every running bar's three parts: they change on every frame, and three items were
        # three setOpts, three paints and three more bounds asked on each repaint of the plot.
        shown = (xs, tuple(tuple(v) for v in parts.values()), width, looks)
        if (item is not None or xs) and self._differs(key, shown):  # made with the first running epoch
            changed = True
            if item is None:
                item = self.items[key] = pg.BarGraphItem(x=[], height=[], width=width)
                item.setZValue(5)  # over the finished epochs' mean bar, which shows through
                item.setToolTip(RUNNING_LEGEND)
                self.plot_item.addItem(item)
            item.setVisible(bool(xs))
            if xs:
                bars: dict[str, list] = {"x": [], "y0": [], "height": [], "brushes": [], "pens": []}
                for i, ((_run, colour), (_name, dimmed)) in enumerate(zip(colours, looks, strict=True)):
                    bottom = 0.0
                    for seg, values in parts.items():
                        bars["x"].append(xs[i])
                        bars["y0"].append(bottom)
                        bars["height"].append(values[i])
                        tint = colour if seg != "other" else QColor(OTHER_COLOUR)
                        bars["brushes"].append(_running_brush(tint, seg, dimmed))
                        bars["pens"].append(_running_pen(colour, dimmed))
                        bottom += values[i]
                item.setOpts(
                    x=np.array(bars["x"]),
                    y0=np.array(bars["y0"]),
                    height=np.array(bars["height"]),
                    width=width * RUNNING_WIDTH,
                    brushes=bars["brushes"],
                    pens=bars["pens"],
                )
        if xs and self.running_sample is None:
            self.running_sample = pg.BarGraphItem(x=[0], height=[1], width=1)
            self.plot_item.legend.addItem(self.running_sample, RUNNING_LEGEND)
            self.restyle_legend()
            changed = True
        elif not self.running and not keep_legend and self.running_sample is not None:  # nothing to explain
            self.plot_item.legend.removeItem(self.running_sample)
            self.running_sample = None
            changed = True
        return changed


def _segment_heights(run: RunData, n: int) -> tuple[float, ...]:
    """Each segment's mean over a run's first n epochs (compute, input wait, the rest of the epoch time)."""
    epoch_time = _mean(run.epochs["epoch_time"][:n])
    bottom, out = 0.0, []
    for _seg, col in SEGMENTS:
        value = _mean(run.epochs[col][:n]) if col else epoch_time - bottom
        value = max(0.0, value) if np.isfinite(value) else 0.0
        out.append(value)
        bottom += value
    return tuple(out)


def _mean(values) -> float:
    """Mean of the finite values; NaN (no bar part) where there are none, without numpy's empty-slice warning."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if len(finite) else float("nan")


def _looks(source: str, colours: list[tuple[RunData, QColor]], selection: set[tuple[str, int]]) -> tuple:
    """(colour name, dimmed) of each run's bar: what its brush and pen are made from."""
    return tuple((colour.name(), bool(selection) and (source, run.index) not in selection) for run, colour in colours)


def _running_brush(colour: QColor, segment: str = "compute", dimmed: bool = False):
    """A light tint of the colour, opaque, so the running bar reads as a pale window in its run's solid bar."""
    background = QColor(PLOT_COLOURS["background"])
    share = RUNNING_TINT / (3 if dimmed else 1)
    c = QColor.fromRgbF(*(b + (f - b) * share for b, f in zip(_rgb(background), _rgb(QColor(colour)), strict=True)))
    brush = pg.mkBrush(c)
    if segment == "input wait":
        brush = pg.mkBrush(QColor(colour))
        brush.setStyle(Qt.BrushStyle.BDiagPattern)
    return brush


def _rgb(c: QColor) -> tuple[float, float, float]:
    return c.redF(), c.greenF(), c.blueF()


def _running_pen(colour: QColor, dimmed: bool = False):
    pen = QPen(run_pen(colour, compare=False, dimmed=dimmed, highlighted=False))  # a copy: run_pen's are shared
    pen.setStyle(Qt.PenStyle.DashLine)
    return pen


def segment_brush(segment: str, colour: QColor, dimmed: bool):
    c = QColor(OTHER_COLOUR) if segment == "other" else QColor(colour)
    if dimmed:
        c.setAlpha(40)
    brush = pg.mkBrush(c)
    if segment == "input wait":
        brush.setStyle(Qt.BrushStyle.BDiagPattern)
    return brush
