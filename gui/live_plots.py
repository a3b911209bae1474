"""The live plots: loss against step, time and epoch; epoch time split; throughput; memory.

Curves are created once per run and updated with setData, only for runs whose data changed
since the plot was last drawn. Which plot is updated when is decided by the window's
Refresher (gui/refresh.py); every update goes through its PlotPacer.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from batchlab.core.model import RunData, SweepData
from batchlab.gui.plot_style import MIB, SOURCE_LABELS, BatchColours, lay_out_grid, make_plot, run_brush, run_pen
from batchlab.gui.refresh import PlotPacer
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

RunKey = tuple[str, int]  # (source id: "main" or "compare", run index)

# series id -> (plot id, x column, y column, table, symbol, pen style or None, batch sizes in legend).
# Colours mean the same batch size in every plot, so only the two loss plots (whose top right is
# usually empty) carry the batch-size legend; the others explain their line styles instead.
SERIES = {
    "loss_step": ("loss_step", "step", "loss", "steps", None, None, True),
    "loss_time": ("loss_time", "wall_time", "loss", "steps", None, None, True),
    "train_loss": ("loss_epoch", "epoch", "train_loss", "epochs", "o", None, False),
    "val_loss": ("loss_epoch", "epoch", "val_loss", "epochs", "t", Qt.PenStyle.DotLine, False),
    "throughput": ("throughput", "epoch", "samples_per_s", "epochs", "o", None, False),
    "tf_peak": ("memory", "epoch", "tf_peak_bytes", "epochs", "o", None, False),
    "device_mem": ("memory", "epoch", "device_memory_bytes", "epochs", "t", Qt.PenStyle.DashDotLine, False),
    "rss": ("memory", "epoch", "rss_peak_bytes", "epochs", "s", Qt.PenStyle.DotLine, False),
}
MEMORY_SERIES = ("tf_peak_bytes", "device_memory_bytes", "rss_peak_bytes")

PLOTS = {
    # plot id -> title, x label, x units, y label, y units
    "loss_step": ("Loss vs step", "step", None, "training loss", None),
    "loss_time": ("Loss vs wall-clock time", "time since run start", "s", "training loss", None),
    "loss_epoch": ("Loss per epoch", "epoch", None, "loss", None),
    "epoch_split": ("Epoch time split", "batch size", None, "mean epoch time", "s"),
    "throughput": ("Training throughput", "epoch", None, "throughput", "samples/s"),
    "memory": ("Memory per epoch", "epoch", None, "memory", "MiB"),
}
# Grey legend entries explaining a series' line style, added once the series has data
STYLE_LEGEND = {
    "train_loss": "train",
    "val_loss": "validation",
    "tf_peak": "TensorFlow peak",
    "device_mem": "device (nvidia-smi)",
    "rss": "host RSS",
}
PLOT_ORDER = tuple(PLOTS)
PLOT_TABLE = {plot_id: "steps" if plot_id in ("loss_step", "loss_time") else "epochs" for plot_id in PLOTS}
SEGMENTS = (("compute", "compute_time"), ("input wait", "input_wait_time"), ("other", None))


class LivePlots(QWidget):
    """Six plots in a grid, one curve per run and series; `refresh()` redraws what changed."""

    plot_ids = PLOT_ORDER

    def __init__(self, colours: BatchColours, pacer: PlotPacer | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.colours = colours
        self.pacer = pacer if pacer is not None else PlotPacer()  # the window passes its Refresher's
        self.plots: dict[str, pg.PlotWidget] = {
            plot_id: make_plot(
                title, xl, xu, yl, yu, log2_x=plot_id == "epoch_split", many_points=PLOT_TABLE[plot_id] == "steps"
            )
            for plot_id, (title, xl, xu, yl, yu) in PLOTS.items()
        }
        lay_out_grid(self, self.plots, columns=3)
        self.sources: dict[str, SweepData] = {}
        self._curves: dict[tuple[str, int, str], pg.PlotDataItem] = {}
        self._drawn: dict[tuple[str, int, str], int] = {}  # (source, run, plot) -> table version drawn
        self._legend_named: set[tuple[str, str, int]] = set()
        self._style_named: set[str] = set()
        self._bars: dict[tuple[str, str], pg.BarGraphItem] = {}
        self._bars_drawn: dict[str, int] = {}
        self.selection: set[RunKey] = set()
        self._add_segment_legend()

    # ------------------------------------------------------------ sources

    def set_source(self, source: str, data: SweepData | None) -> None:
        """Show this sweep as `source` ("main" or "compare"), replacing what was there."""
        for key in [k for k in self._curves if k[0] == source]:
            curve = self._curves.pop(key)
            plot = self.plots[SERIES[key[2]][0]].getPlotItem()
            plot.removeItem(curve)
            plot.legend.removeItem(curve)
        self._legend_named = {n for n in self._legend_named if n[1] != source}
        for key in [k for k in self._bars if k[0] == source]:
            self.plots["epoch_split"].getPlotItem().removeItem(self._bars.pop(key))
        self._drawn = {k: v for k, v in self._drawn.items() if k[0] != source}
        self._bars_drawn.pop(source, None)
        if data is None:
            self.sources.pop(source, None)
        else:
            self.sources[source] = data
        self.refresh()

    def refresh(self) -> None:
        """Redraw every plot whose runs changed since it was last drawn (through the pacer).

        During a sweep the window's Refresher decides instead which plot is updated on each tick
        (gui/refresh.py); this is the full redraw after a new source, selection or colours.
        """
        self.pacer.draw(self.plot_ids, self.update_plot)

    def has_pending(self) -> bool:
        """True while some plot has data it has not drawn yet."""
        for plot_id in PLOT_ORDER:
            table = PLOT_TABLE[plot_id]
            for source, data in self.sources.items():
                for run in data.ordered_runs():
                    if self._drawn.get((source, run.index, plot_id)) != run.table_version(table):
                        return True
        return False

    def update_plot(self, plot_id: str) -> bool:
        """Bring one plot up to date; True if anything visible changed (then Qt repaints it)."""
        table = PLOT_TABLE[plot_id]
        changed = False
        for source, data in self.sources.items():
            runs_changed = False
            for run in data.ordered_runs():
                key = (source, run.index, plot_id)
                version = run.table_version(table)
                if self._drawn.get(key) == version:
                    continue
                self._drawn[key] = version
                if plot_id == "epoch_split":
                    runs_changed = runs_changed or bool(len(run.epochs))  # a run without epochs has no bar
                else:
                    runs_changed = self._draw_run(source, run, plot_id) or runs_changed
            if plot_id == "epoch_split" and (runs_changed or source not in self._bars_drawn):
                self._draw_bars(source, data)
                self._bars_drawn[source] = 1
                runs_changed = True
            changed = changed or runs_changed
        if changed:
            # Settle the auto-range now: left to the paint, it changes the axes and costs a second paint.
            self.plots[plot_id].getPlotItem().getViewBox().updateAutoRange()
        return changed

    def _draw_run(self, source: str, run: RunData, only_plot: str) -> bool:
        """Set this run's curves in one plot; True if that shows: new data or a new legend entry.

        An empty curve made ahead of its data changes nothing on screen, so it costs no repaint
        (and nothing from the window's CPU budget).
        """
        legend = self.plots[only_plot].getPlotItem().legend
        entries = len(legend.items)
        shown = False
        for series, (plot_id, x_col, y_col, table, symbol, style, named) in SERIES.items():
            if plot_id != only_plot:
                continue
            columns = run.steps if table == "steps" else run.epochs
            if not len(columns):
                # Create a starting run's curves (and legend entries) before its data arrives, while
                # the child is still loading TensorFlow, so the first data costs only a setData.
                if run.status == "running" and y_col not in MEMORY_SERIES:
                    self._curve(source, run, series, plot_id, symbol, style, named)
                continue
            x = np.asarray(columns[x_col], dtype=float)
            y = np.asarray(columns[y_col], dtype=float)
            if x_col == "epoch":
                x = x + 1
            if y_col in MEMORY_SERIES:
                if not (y > 0).any():
                    continue
                y = np.where(y > 0, y / MIB, np.nan)
            curve = self._curve(source, run, series, plot_id, symbol, style, named)
            curve.setData(x, y, connect="finite")
            shown = True
        return shown or len(legend.items) != entries

    def _curve(self, source, run, series, plot_id, symbol, style, named) -> pg.PlotDataItem:
        key = (source, run.index, series)
        curve = self._curves.get(key)
        if curve is None:
            name = None
            legend_key = (plot_id, source, run.batch_size)
            if named and legend_key not in self._legend_named:
                self._legend_named.add(legend_key)
                name = f"batch {run.batch_size}{SOURCE_LABELS[source]}"
            # Step curves (no symbols) can hold many points: drawn without antialiasing, which costs
            # several times more, and with a thin pen (see run_pen). A curve of a point per epoch
            # needs no guard against huge values far outside a zoomed view (dynamicRangeLimit),
            # which re-derives its displayed data at every change of the y range.
            many_points = symbol is None
            curve = pg.PlotDataItem(
                name=name,
                symbol=symbol,
                symbolSize=6,
                antialias=not many_points,
                dynamicRangeLimit=1e6 if many_points else None,
            )
            curve.run_key = (source, run.index)
            curve.pen_style = style
            curve.many_points = many_points
            self.plots[plot_id].getPlotItem().addItem(curve)
            self._curves[key] = curve
            self._add_style_legend(series)
            self._style_curve(curve, run.batch_size)
        return curve

    # ------------------------------------------------------------ epoch time bars

    def _draw_bars(self, source: str, data: SweepData) -> None:
        runs = [r for r in data.ordered_runs() if len(r.epochs)]
        seeds = sorted({r.seed for r in data.runs.values()}) or [0]
        n_groups = len(seeds) * max(1, len(self.sources))
        width = 0.8 / n_groups
        group_of_source = sorted(self.sources).index(source) if source in self.sources else 0
        xs, bottoms, heights, colours = [], {s: [] for s, _ in SEGMENTS}, {s: [] for s, _ in SEGMENTS}, []
        for run in runs:
            group = group_of_source * len(seeds) + seeds.index(run.seed)
            xs.append(np.log2(run.batch_size) - 0.4 + width * (group + 0.5))
            colours.append((run, self.colours.colour(run.batch_size)))
            epoch_time = float(np.nanmean(run.epochs["epoch_time"]))
            bottom = 0.0
            for seg, col in SEGMENTS:
                value = float(np.nanmean(run.epochs[col])) if col else epoch_time - bottom
                value = max(0.0, value) if np.isfinite(value) else 0.0
                bottoms[seg].append(bottom)
                heights[seg].append(value)
                bottom += value
        for seg, _ in SEGMENTS:
            key = (source, seg)
            item = self._bars.get(key)
            if item is None:
                item = self._bars[key] = pg.BarGraphItem(x=[], height=[], width=width)
                self.plots["epoch_split"].getPlotItem().addItem(item)
            brushes, pens = [], []
            for run, colour in colours:
                dimmed = bool(self.selection) and (source, run.index) not in self.selection
                brushes.append(_segment_brush(seg, colour, dimmed))
                pens.append(run_pen(colour, compare=source == "compare", dimmed=dimmed, highlighted=False))
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

    def _add_segment_legend(self) -> None:
        legend = self.plots["epoch_split"].getPlotItem().legend
        grey = QColor("#555555")
        for seg, _ in SEGMENTS:
            sample = pg.BarGraphItem(x=[0], height=[1], width=1, brush=_segment_brush(seg, grey, False))
            legend.addItem(sample, seg)

    def _add_style_legend(self, series: str) -> None:
        if series not in STYLE_LEGEND or series in self._style_named:
            return
        self._style_named.add(series)
        plot_id, _x, _y, _t, symbol, style, _named = SERIES[series]
        grey = QColor("#555555")
        pen = pg.mkPen(grey, width=1.6, style=style or Qt.PenStyle.SolidLine)
        sample = pg.PlotDataItem([0], [0], pen=pen, symbol=symbol, symbolPen=pen, symbolBrush=grey)
        self.plots[plot_id].getPlotItem().legend.addItem(sample, STYLE_LEGEND[series])

    # ------------------------------------------------------------ selection and colours

    def set_selection(self, keys: set[RunKey]) -> None:
        """Highlight these runs everywhere and dim the rest (empty set: all normal)."""
        self.selection = set(keys)
        self.restyle()

    def restyle(self) -> None:
        for (source, index, _series), curve in self._curves.items():
            run = self.sources.get(source).runs.get(index) if source in self.sources else None
            if run is not None:
                self._style_curve(curve, run.batch_size)
        self._bars_drawn.clear()
        self.refresh()

    def _style_curve(self, curve: pg.PlotDataItem, batch_size: int) -> None:
        colour = self.colours.colour(batch_size)
        key = curve.run_key
        dimmed = bool(self.selection) and key not in self.selection
        highlighted = key in self.selection
        compare = key[0] == "compare"
        pen = run_pen(
            colour,
            compare=compare,
            dimmed=dimmed,
            highlighted=highlighted,
            style=curve.pen_style,
            thin=curve.many_points,
        )
        curve.setPen(pen)
        curve.setSymbolPen(pen)
        curve.setSymbolBrush(run_brush(colour, dimmed=dimmed))
        curve.setZValue(10 if highlighted else 0)

    def curve_count(self, plot_id: str) -> int:
        """How many run curves with data this plot holds (for tests and the screenshot script)."""
        return sum(
            1
            for (_s, _i, series), c in self._curves.items()
            if SERIES[series][0] == plot_id and c.xData is not None and len(c.xData)
        )


def _segment_brush(segment: str, colour: QColor, dimmed: bool):
    c = QColor(colour)
    if segment == "other":
        c = QColor("#BBBBBB")
    if dimmed:
        c.setAlpha(40)
    brush = pg.mkBrush(c)
    if segment == "input wait":
        brush.setStyle(Qt.BrushStyle.BDiagPattern)
    return brush
