"""The Analysis tab: steps, examples and time to target against batch size, the gradient noise scale over
training, and the recommendation.

Every number comes from batchlab.core.analysis.analyse.analyse (the same as `batchlab report`):
S(B) and E(B) on log-log axes with each run that met the target, the McCandlish fit and its
bootstrap band, the perfect-scaling line through the smallest batch and the regimes shaded; T(B)
with the measured runs, the predicted curve and its minimum marked; B_simple over training for the
runs that measured it (the Bcrit it predicts) beside the fitted Bcrit; the recommendation in words.
The analysis is recomputed when a run has started or ended, and only while the tab is visible.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from batchlab.core.analysis.analyse import Analysis, analyse
from batchlab.core.analysis.loss_level import LossLevel, describe_level, loss_level_rows
from batchlab.core.analysis.noise_scale import NoiseScaleSeries, noise_scale_series
from batchlab.core.analysis.regimes import DIMINISHING, PERFECT, PLATEAU
from batchlab.core.model import SweepData
from batchlab.gui.plot_axes import Axis, make_plot
from batchlab.gui.plot_style import (
    LEFT_AXIS_PX,
    PLOT_COLOURS,
    BatchColours,
    remove_items,
    run_brush,
    run_pen,
    sync_legend,
)
from batchlab.gui.refresh import MainSweepView
from PySide6.QtWidgets import QFrame, QGridLayout, QScrollArea, QTextBrowser, QVBoxLayout, QWidget

PLOTS = {
    # plot id -> title, y label, y units
    "steps": ("Steps to target", "steps", None),
    "examples": ("Examples to target", "examples", None),
    "time": ("Time to target", "time (s)", None),
    "noise": ("Gradient noise scale", "B_simple (samples)", None),
}
REGIME_COLOURS = {PERFECT: "#009E73", DIMINISHING: "#E69F00", PLATEAU: "#D55E00"}  # Okabe-Ito green, orange, red
REGIME_ALPHA = 38  # of 255: shading behind the points
BAND_ALPHA = 70
FIT_WIDTH = 2.0


class Log10Axis(Axis):
    """A y axis whose values are log10 of an amount, labelled with the amounts (1, 2, 5 x a power of ten
    where the range is under two decades, else the powers of ten alone); the other steps are unlabelled."""

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph override)
        if not (math.isfinite(minVal) and math.isfinite(maxVal)) or maxVal <= minVal or maxVal - minVal > 30:
            return super().tickValues(minVal, maxVal, size)
        decades = range(math.floor(minVal), math.ceil(maxVal) + 1)
        steps = (1, 2, 5) if maxVal - minVal < 2 else (1,)
        major = [d + math.log10(m) for d in decades for m in steps]
        minor = [d + math.log10(m) for d in decades for m in range(2, 10) if m not in steps]
        inside = [v for v in major if minVal <= v <= maxVal]
        if len(inside) < 2:  # a narrow range (70-80): evenly spaced amounts, labelled
            lo, hi = 10.0**minVal, 10.0**maxVal
            rough = (hi - lo) / 4  # about four labelled amounts: a 1, 2 or 5 x 10^k step
            power = 10.0 ** math.floor(math.log10(rough))
            step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough)
            amounts = np.arange(math.ceil(lo / step) * step, hi, step)
            return [(1.0, [math.log10(v) for v in amounts if v > 0]), (0.1, [])]
        return [(1.0, inside), (0.1, [v for v in minor if minVal <= v <= maxVal])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph override)
        if spacing != 1.0:
            return ["" for _ in values]
        # three significant figures: the narrow-range steps (2, 2.5, 3) keep their half; thousands get commas
        return [f"{10.0**v:,.0f}" if v >= 3 else f"{10.0**v:.3g}" for v in values]


def _log10(values) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(v > 0, np.log10(v), np.nan)


def _level_table(level: LossLevel | None) -> str:
    """The loss-and-time table as HTML (the rows `batchlab report` prints), with the line saying how the level and
    the smoothing were chosen; "" without a level."""
    if level is None or not math.isfinite(level.level):
        return ""
    rows = loss_level_rows(level)
    head = "".join(f"<th align='right'>&nbsp;{html.escape(c)}&nbsp;</th>" for c in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td align='right'>&nbsp;{html.escape(c)}&nbsp;</td>" for c in row) + "</tr>"
        for row in rows[1:]
    )
    return (
        f"<p style='margin-bottom:2px'>{html.escape(describe_level(level))}</p>"
        f"<table cellspacing='0' cellpadding='1' border='0'><tr>{head}</tr>{body}</table>"
    )


@dataclass(frozen=True)
class AnalysisFigures:
    """What the Analysis tab shows of a sweep, computed without Qt (in the window's worker thread for a file)."""

    analysis: Analysis
    reached: list[tuple[int, float, float, float]]  # (batch, steps, examples, s) of each run the plots mark
    noise: list[tuple[int, int, NoiseScaleSeries]]  # (batch, seed, B_simple over training) of runs that measured it
    runs: int


def analysis_figures(data: SweepData | None) -> AnalysisFigures | None:
    """analyse(data) (the same as `batchlab report`) and the runs the plots mark; None without a sweep."""
    if data is None:
        return None
    a = analyse(data, surface="window")
    noise = [
        (run.batch_size, run.seed, series)
        for run in data.ordered_runs()
        if (series := noise_scale_series(run.noise_scale.as_dict())) is not None
    ]
    return AnalysisFigures(a, _reached(data, a), noise, len(data.runs))


def _reached(data: SweepData, a: Analysis) -> list[tuple[int, float, float, float]]:
    """(batch, steps, examples, s) of each run that met the target; without a target, of each run that reached
    the common loss level (loss_level.py), so the plots show the same comparison as the text."""
    if a.target:
        return [
            (r.batch_size, r.figures.steps_to_target, r.figures.examples_to_target, r.figures.time_to_target)
            for r in data.ordered_runs()
            if r.status == "ok" and r.figures.target_reached == 1
        ]
    level = a.loss_level
    if level is None or not math.isfinite(level.level):
        return []
    return [(r.batch_size, r.steps, r.examples, r.time) for r in level.runs if math.isfinite(r.time)]


class AnalysisView(MainSweepView):
    """Three plots against batch size (log2 x axis, log10 y axis) over the noise-scale plot (shown when a run
    measured it) and the recommendation text."""

    def __init__(self, colours: BatchColours, parent: QWidget | None = None):
        super().__init__(parent)
        self.colours = colours
        self.plots: dict[str, pg.PlotWidget] = {}
        for plot_id, (title, y_label, y_units) in PLOTS.items():
            x_label = "step" if plot_id == "noise" else "batch size"
            widget = make_plot(title, x_label, None, y_label, y_units, log2_x=plot_id != "noise")
            axis = Log10Axis(orientation="left")  # y values are log10 of the amounts
            widget.getPlotItem().setAxisItems({"left": axis})
            # a new axis item starts without a label (pyqtgraph does not carry the old one's over); the units are
            # in the label's text, since an SI prefix would scale the log10 values, not the amounts
            widget.getPlotItem().setLabel("left", y_label, units=y_units)
            axis.setWidth(LEFT_AXIS_PX)
            axis.enableAutoSIPrefix(False)  # the values are log10 amounts: a "(x0.001)" would scale the logs
            axis.setStyle(maxTickLevel=1)
            widget.getPlotItem().getViewBox().setDefaultPadding(0.06)
            self.plots[plot_id] = widget
        self.text = QTextBrowser()
        self.text.setObjectName("analysis_text")
        self.text.setOpenLinks(False)
        # The grid sits in a scroll area: in a narrow window (1024x700 with the setup panel beside it) the tab
        # scrolls instead of cutting off the right-hand plot and the legends' ends.
        content = QWidget()
        scroll = QScrollArea()
        scroll.setObjectName("analysis_scroll")
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(content)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        self.scroll = scroll
        layout = QGridLayout(content)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(4)
        layout.addWidget(self.plots["steps"], 0, 0)
        layout.addWidget(self.plots["examples"], 0, 1)
        layout.addWidget(self.plots["time"], 0, 2)
        layout.addWidget(self.plots["noise"], 1, 0)
        layout.addWidget(self.text, 1, 1, 1, 2)
        self.grid = layout
        self.analysis: Analysis | None = None
        self.figures: AnalysisFigures | None = None
        self._items: dict[str, list[pg.GraphicsObject]] = {k: [] for k in PLOTS}
        self._samples: dict[str, list[pg.GraphicsObject]] = {k: [] for k in PLOTS}  # legend entries only
        self.show_text([])
        self.plots["noise"].setVisible(False)

    # ------------------------------------------------------------ what the window calls

    def restyle(self) -> None:
        self.invalidate_when_shown()  # new colours (e.g. a sweep's batch sizes as it starts): hidden, when shown

    def figures_job(self) -> Callable[[], AnalysisFigures | None]:
        """The analysis (MainSweepView asks when a run started or ended, while the tab is shown); Qt-free."""
        data = self.data
        return lambda: analysis_figures(data)

    def show_computing(self) -> None:
        """While the worker analyses: no plot or sentence of the last data, a line saying what is computed."""
        self.analysis = None
        self._clear()
        self.plots["noise"].setVisible(False)
        runs = len(self.data.runs) if self.data is not None else 0
        self.text.setHtml(f"<p>Computing the analysis of {runs:,} runs…</p>")

    def draw(self, figures: AnalysisFigures | None) -> None:
        self.figures = figures
        self.analysis = figures.analysis if figures is not None else None
        self._draw()

    # ------------------------------------------------------------ drawing

    def _clear(self) -> None:
        for plot_id, widget in self.plots.items():
            plot = widget.getPlotItem()
            remove_items(plot, self._items[plot_id])
            for sample in self._samples[plot_id]:
                plot.legend.removeItem(sample)
            self._samples[plot_id] = []

    def _add(self, plot_id: str, item: pg.GraphicsObject) -> pg.GraphicsObject:
        self.plots[plot_id].getPlotItem().addItem(item)
        self._items[plot_id].append(item)
        return item

    def _draw(self) -> None:
        self._clear()
        a = self.analysis
        self.show_text(a.recommendation if a is not None else [], a.loss_level if a is not None else None)
        self._set_titles(a)
        if a is None or self.figures is None:
            self.plots["noise"].setVisible(False)
            return
        for plot_id in ("steps", "examples"):
            self._draw_regimes(plot_id, a, legend=plot_id == "steps")
        self._draw_runs(a, self.figures.reached)
        self._draw_fit(a)
        self._draw_time(a)
        self._draw_noise_scale(a)
        for widget in self.plots.values():
            widget.getPlotItem().getViewBox().enableAutoRange()
            sync_legend(widget.getPlotItem())

    def _draw_regimes(self, plot_id: str, a: Analysis, legend: bool) -> None:
        named = set()
        for span in a.regime_spans:
            colour = pg.mkColor(REGIME_COLOURS[span.regime])
            colour.setAlpha(REGIME_ALPHA)
            region = pg.LinearRegionItem(
                (math.log2(span.low), math.log2(span.high)), movable=False, brush=pg.mkBrush(colour), pen=pg.mkPen(None)
            )
            region.setZValue(-20)
            region.regime = span.regime
            self._add(plot_id, region)
            if legend and span.regime not in named:  # a legend entry per regime: a square of its colour
                named.add(span.regime)
                colour.setAlpha(4 * REGIME_ALPHA)
                sample = pg.ScatterPlotItem(symbol="s", size=10, brush=pg.mkBrush(colour), pen=None)
                self.plots[plot_id].getPlotItem().legend.addItem(sample, span.regime)  # short: ~190 px plots at 1024
                self._samples[plot_id].append(sample)

    def _set_titles(self, a: Analysis | None) -> None:
        """The plots' titles: to the target, or without one to the common loss level the text compares at."""
        level = a.loss_level if a is not None and not a.target else None
        for plot_id, (title, _y, _u) in PLOTS.items():
            if plot_id != "noise" and level is not None and math.isfinite(level.level):
                title = title.replace("target", f"loss {level.level:.3g}")
            self.plots[plot_id].getPlotItem().setTitle(title)

    def _draw_runs(self, a: Analysis, reached: list[tuple[int, float, float, float]]) -> None:
        spots = {"steps": [], "examples": [], "time": []}
        for batch, steps, examples, seconds in reached:
            colour = self.colours.colour(batch)
            x = math.log2(batch)
            for plot_id, value in (("steps", steps), ("examples", examples), ("time", seconds)):
                if value > 0 and math.isfinite(value):
                    spots[plot_id].append(
                        {
                            "pos": (x, math.log10(value)),
                            "brush": run_brush(colour, dimmed=False),
                            "pen": run_pen(colour, compare=False, dimmed=False, highlighted=False),
                            "symbol": "o",
                            "size": 8,
                        }
                    )
        for plot_id, plot_spots in spots.items():
            if plot_spots:  # named once (the time plot): the legends of the others have the fit and regimes
                name = ("runs that met it" if a.target else "runs that reached it") if plot_id == "time" else None
                self._add(plot_id, pg.ScatterPlotItem(spots=plot_spots, name=name))

    def _draw_fit(self, a: Analysis) -> None:
        p, fit = a.prediction, a.critical
        neutral = PLOT_COLOURS["neutral"]
        measured = [s for s in a.batches if s.steps_to_target.n]
        if measured:  # perfect scaling from the smallest batch that met the target: S = S(B0) B0 / B
            first = measured[0]
            b = np.geomspace(first.batch_size, max(s.batch_size for s in a.batches) * 2, 32)
            steps = first.steps_to_target.mean * first.batch_size / b
            pen = pg.mkPen(neutral, width=1.2, style=pg.QtCore.Qt.PenStyle.DashLine)
            name = f"perfect scaling from {first.batch_size:,}"
            self._add("steps", pg.PlotDataItem(np.log2(b), _log10(steps), pen=pen, name=name))
            examples = np.full(len(b), first.examples_to_target.mean)
            self._add("examples", pg.PlotDataItem(np.log2(b), _log10(examples), pen=pen, name=name))
        if p is None or fit is None:
            return
        x = np.log2(p.batch_sizes)
        b = np.asarray(p.batch_sizes)
        # the legend is narrow: without an interval (too few runs) the text says why; the legend only the value
        label = f"fit, Bcrit = {fit.bcrit.value:,.0f}" if math.isnan(fit.bcrit.low) else f"fit, {fit.bcrit.text()}"
        for plot_id, scale in (("steps", 1.0), ("examples", b)):
            band_colour = pg.mkColor(neutral)
            band_colour.setAlpha(BAND_ALPHA)
            low, high = np.asarray(p.steps_low) * scale, np.asarray(p.steps_high) * scale
            if np.isfinite(low).any():
                band = pg.FillBetweenItem(
                    pg.PlotDataItem(x, _log10(low)), pg.PlotDataItem(x, _log10(high)), brush=pg.mkBrush(band_colour)
                )
                band.setZValue(-10)
                band.band = (x, low, high)
                self._add(plot_id, band)
            curve = np.asarray(p.steps) * scale
            pen = pg.mkPen(PLOT_COLOURS["foreground"], width=FIT_WIDTH)
            self._add(plot_id, pg.PlotDataItem(x, _log10(curve), pen=pen, name=label))

    def _draw_time(self, a: Analysis) -> None:
        p = a.prediction
        if p is None or not p.time:
            return
        x = np.log2(p.batch_sizes)
        pen = pg.mkPen(PLOT_COLOURS["foreground"], width=FIT_WIDTH)
        self._add("time", pg.PlotDataItem(x, _log10(p.time), pen=pen, name="T(B), predicted"))
        if math.isfinite(a.best_predicted):
            bx, by = math.log2(a.best_predicted), math.log10(a.best_predicted_time)
            star = pg.ScatterPlotItem(
                [bx],
                [by],
                symbol="star",
                size=16,
                brush=pg.mkBrush(PLOT_COLOURS["foreground"]),
                pen=None,
                name=f"minimum: batch {a.best_predicted:,.0f}",
            )
            self._add("time", star)

    def _draw_noise_scale(self, a: Analysis) -> None:
        """B_simple over training, a line per run that measured it (--noise-scale-every), and the fitted Bcrit.

        The plot is shown only when a run measured it; the text then takes the rest of the row."""
        measured, last_step = False, 0.0
        for batch_size, seed, series in self.figures.noise:
            measured = True
            last_step = max(last_step, float(series.steps.max()))
            pen = run_pen(self.colours.colour(batch_size), compare=False, dimmed=False, highlighted=False)
            name = f"batch {batch_size}" + (f", seed {seed}" if self.figures.runs > len(a.batches) else "")
            item = pg.PlotDataItem(series.steps, _log10(series.b_simple), pen=pen, name=name, connect="finite")
            self._add("noise", item)
        fit = a.critical
        if measured and fit is not None and fit.bcrit.kind == "=":
            line = pg.InfiniteLine(
                pos=math.log10(fit.bcrit.value),
                angle=0,
                pen=pg.mkPen(PLOT_COLOURS["foreground"], width=1.2, style=pg.QtCore.Qt.PenStyle.DashLine),
            )
            line.bcrit = fit.bcrit.value
            self._add("noise", line)
            label = pg.TextItem(f"fitted Bcrit {fit.bcrit.value:,.0f}", color=PLOT_COLOURS["foreground"], anchor=(1, 1))
            label.setPos(last_step, math.log10(fit.bcrit.value))
            self._add("noise", label)
            sample = pg.PlotDataItem(pen=line.pen)
            self.plots["noise"].getPlotItem().legend.addItem(sample, f"fitted Bcrit = {fit.bcrit.value:,.0f}")
            self._samples["noise"].append(sample)
        self.plots["noise"].setVisible(measured)
        self.grid.removeWidget(self.text)
        self.grid.addWidget(self.text, 1, 1 if measured else 0, 1, 2 if measured else 3)

    def show_text(self, paragraphs: list[str], level: LossLevel | None = None) -> None:
        """The recommendation as a list under the loss-and-time table (the report's, loss_level_rows), or what the
        tab needs when there is no sweep."""
        if not paragraphs:
            self.text.setHtml(
                "<p>Open or run a sweep; this tab shows which batch size reaches a loss soonest and why "
                "(with a target, the target).</p>"
            )
            return
        items = "".join(f"<li style='margin-bottom:4px'>{html.escape(p)}</li>" for p in paragraphs)
        self.text.setHtml(f"<ul style='margin-left:-20px'>{items}</ul>{_level_table(level)}")

    def items(self, plot_id: str, kind: type) -> list:
        """The items of a kind drawn in a plot (for tests)."""
        return [i for i in self._items[plot_id] if isinstance(i, kind)]
