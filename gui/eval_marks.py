"""Evaluation points and "target met" marks on the two loss plots.

Runs with `--eval-every` or a target have evaluation points (the run file's evals/ table, the
`evaluation` events): each is drawn as a marker at its step (examples, wall-clock time) and a
loss-scale value (the validation loss, or the metric core.figures.evaluation_points chooses), the
markers of a run joined by a dotted line. Where a run met its target a vertical line marks the
evaluation that met it, labelled "met val_accuracy>0.98 at step 1,350". The figures come from
core.figures.evaluation_points, so a live run and a reopened file show the same.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from batchlab.core.figures import EvaluationPoints
from batchlab.gui.plot_style import PLOT_COLOURS, run_pen, text_colour
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPen

# The x value of an evaluation for each loss-plot x axis (live_series.LOSS_X, and "wall_time" for loss vs time)
EVAL_X = {"step": "steps", "examples": "examples", "wall_time": "wall_time"}
LABEL_ROWS = 3  # target labels of several runs stack in this many rows under the top of the plot
LABEL_POINT_SIZE = 8.0  # as the legends' text
LEGEND_TEXT = {"val_loss": "validation loss (evaluations)", "train_loss": "train loss (evaluations)"}


class EvalMarks:
    """Per run and loss plot: a dotted curve of its evaluation points and, once met, the target line."""

    def __init__(self) -> None:
        self.curves: dict[tuple[str, int, str], pg.PlotDataItem] = {}
        self.lines: dict[tuple[str, int, str], pg.InfiniteLine] = {}
        self.samples: dict[tuple[str, str], pg.PlotDataItem] = {}  # (plot id, metric) -> its grey legend sample

    def _add_legend_sample(self, plot: pg.PlotItem, plot_id: str, metric: str) -> None:
        """One grey legend entry per plot and metric saying what the diamonds are."""
        if (plot_id, metric) in self.samples or plot.legend is None:
            return
        sample = self.samples[(plot_id, metric)] = pg.PlotDataItem([0], [0], symbol="d")
        sample.eval_metric = metric  # hollow like the marks it explains
        self.restyle_legend()
        plot.legend.addItem(sample, LEGEND_TEXT.get(metric, f"{metric} (evaluations)"))

    def restyle_legend(self) -> None:
        """Legend samples in the theme's neutral colour (again after a theme switch)."""
        grey = QColor(PLOT_COLOURS["neutral"])
        for sample in self.samples.values():
            sample.setPen(pg.mkPen(grey, width=1.6, style=Qt.PenStyle.DotLine))
            sample.setSymbolPen(pg.mkPen(grey, width=1.6))
            sample.setSymbolBrush(pg.mkBrush(PLOT_COLOURS["background"]))

    def draw(
        self,
        plot: pg.PlotItem,
        plot_id: str,
        key: tuple[str, int],
        points: EvaluationPoints | None,
        x_axis: str,
        log_x: bool,
        colour: QColor,
        rank: int,
        dimmed: bool = False,
        highlighted: bool = False,
    ) -> int:
        """Bring one run's marks in one plot up to `points`; how many points were handed to setData.

        rank: the run's place among the runs shown (its index), so target labels of several runs stagger.
        """
        mark_key = (*key, plot_id)
        curve = self.curves.get(mark_key)
        if points is None:
            if curve is not None:
                curve.setData([], [])
            self._set_line(plot, mark_key, None, "", log_x, colour, rank, dimmed)
            return 0
        x = getattr(points, EVAL_X[x_axis])
        if curve is None:
            curve = self.curves[mark_key] = pg.PlotDataItem(symbol="d", symbolSize=7, antialias=True)
            curve.run_key = key
            curve.eval_metric = points.metric
            plot.addItem(curve)
            self._add_legend_sample(plot, plot_id, points.metric)
        self.style_curve(curve, colour, dimmed=dimmed, highlighted=highlighted)
        curve.setData(x, points.values, connect="finite")
        curve.setToolTip(f"evaluation points: {points.metric}")
        met_x = float(x[points.met_row]) if points.met_row is not None else None
        self._set_line(plot, mark_key, met_x, points.met_text, log_x, colour, rank, dimmed)
        return len(x)

    def _set_line(self, plot, mark_key, x, text, log_x, colour, rank, dimmed) -> None:
        line = self.lines.get(mark_key)
        if x is None or not math.isfinite(x) or (log_x and x <= 0):
            if line is not None:
                line.setVisible(False)
                line.tag.setVisible(False)
            return
        if line is None:
            line = self.lines[mark_key] = pg.InfiniteLine(angle=90, movable=False)
            line.run_key = mark_key[:2]
            line.tag = TargetLabel()
            # ignoreBounds: a vertical line's y bounds are (0, 0) to pyqtgraph, which would pull the loss axis to zero
            plot.addItem(line, ignoreBounds=True)
            plot.addItem(line.tag, ignoreBounds=True)
        line.met_text = text
        line.rank = rank
        line.colour_name = QColor(colour).name()
        position = math.log10(x) if log_x else x
        line.setPos(position)
        line.setToolTip(text)
        # A label row per run that met its target before this one (in the plot); a run that met it at the same
        # step in the same colour (another seed of its batch size: the same words) shares that run's label.
        shown = [
            other
            for key, other in self.lines.items()
            if key[2] == mark_key[2] and other is not line and other.isVisible() and other.rank < rank
        ]
        twin = any(o.tag.isVisible() and o.met_text == text and o.colour_name == line.colour_name for o in shown)
        line.tag.set_mark(text, position, sum(o.tag.isVisible() for o in shown) % LABEL_ROWS)
        line.setVisible(True)
        line.tag.setVisible(not twin)
        self.style_line(line, colour, dimmed=dimmed)

    def style_curve(self, curve: pg.PlotDataItem, colour: QColor, *, dimmed: bool, highlighted: bool) -> None:
        pen = QPen(run_pen(colour, compare=curve.run_key[0] == "compare", dimmed=dimmed, highlighted=highlighted))
        pen.setStyle(Qt.PenStyle.DotLine)  # (a copy: run_pen's pens are shared)
        curve.setPen(pen)
        curve.setSymbolPen(run_pen(colour, compare=False, dimmed=dimmed, highlighted=highlighted))
        curve.setSymbolBrush(pg.mkBrush(PLOT_COLOURS["background"]))  # hollow: the step curve shows through
        curve.setZValue(12 if highlighted else 5)

    def style_line(self, line: pg.InfiniteLine, colour: QColor, *, dimmed: bool) -> None:
        pen = QPen(run_pen(colour, compare=line.run_key[0] == "compare", dimmed=dimmed, highlighted=False))
        pen.setStyle(Qt.PenStyle.DashLine)  # (a copy: run_pen's pens are shared)
        line.setPen(pen)
        text = text_colour(colour)
        if dimmed:
            text.setAlpha(pen.color().alpha())
        line.tag.setColor(text)
        line.tag.fill = pg.mkBrush(_label_fill())
        line.tag.update()

    def remove(self, plots: dict[str, pg.PlotWidget], source: str) -> None:
        """Take every mark of one source off its plot (and legend samples no curve needs any more)."""
        for store in (self.curves, self.lines):
            for mark_key in [k for k in store if k[0] == source]:
                item = store.pop(mark_key)
                plots[mark_key[2]].getPlotItem().removeItem(item)
                if hasattr(item, "tag"):
                    plots[mark_key[2]].getPlotItem().removeItem(item.tag)
        needed = {(k[2], c.eval_metric) for k, c in self.curves.items()}
        for sample_key in [k for k in self.samples if k not in needed]:
            item = plots[sample_key[0]].getPlotItem()
            sample = self.samples.pop(sample_key)
            if item.legend is not None:
                item.legend.removeItem(sample)

    def met_lines(self, plot_id: str) -> list[tuple[tuple[str, int], float, str]]:
        """(run key, x as the plot's data, label) of each shown target line in a plot (for tests)."""
        out = []
        for (source, index, pid), line in self.lines.items():
            if pid == plot_id and line.isVisible():
                out.append(((source, index), float(line.value()), line.met_text))
        return out

    def points(self, plot_id: str, key: tuple[str, int]) -> tuple[np.ndarray, np.ndarray] | None:
        """x, y handed to a run's evaluation curve in a plot (for tests)."""
        curve = self.curves.get((*key, plot_id))
        if curve is None or curve.xData is None:
            return None
        return curve.xData, curve.yData


class TargetLabel(pg.TextItem):
    """A target line's label: under the top of the plot, as near the line as the plot's width allows.

    Kept whole inside the view (a label beside a line near an edge of a narrow plot was cut off):
    it is centred on the line and slid sideways as far as needed, re-placed when the range changes.
    """

    def __init__(self) -> None:
        super().__init__("", anchor=(0.5, 0.0))
        font = self.textItem.font()
        font.setPointSizeF(LABEL_POINT_SIZE)
        self.setFont(font)
        self.x_data = 0.0
        self.row = 0
        self.forms: tuple[str, ...] = ("",)
        self._form = -1

    def set_mark(self, text: str, x_data: float, row: int) -> None:
        # Narrower forms for narrow plots: "met val_accuracy>0.98" / "at step 1,350", then "met" on its own line
        two = text.replace(" at ", "\nat ", 1)
        self.forms = (text, two, two.replace("met ", "met\n", 1))
        self.setToolTip(text)
        self.x_data, self.row = x_data, row
        self._form = -1
        self.place()

    def _fit(self, width: float) -> None:
        """The widest form of the text that fits `width` pixels (the narrowest if none does)."""
        for i, form in enumerate(self.forms):
            if i != self._form:
                self.setText(form)
                self._form = i
            if self.textItem.boundingRect().width() + 4 <= width:
                return

    def place(self) -> None:
        view = self.getViewBox()
        if view is None or not isinstance(view, pg.ViewBox):
            return
        (x0, x1), (_y0, y1) = view.viewRange()
        width = view.width()
        self._fit(width)
        text_width = self.textItem.boundingRect().width()
        if width <= 0 or x1 <= x0 or text_width <= 0:
            return
        line_px = (self.x_data - x0) / (x1 - x0) * width
        left = min(max(line_px - text_width / 2, 2.0), max(2.0, width - text_width - 2.0))
        self.setAnchor(((line_px - left) / text_width, -1.05 * self.row))
        self.setPos(self.x_data, y1)

    def viewRangeChanged(self) -> None:  # noqa: N802 (pyqtgraph hook)
        super().viewRangeChanged()
        self.place()

    def viewTransformChanged(self) -> None:  # noqa: N802 (pyqtgraph hook): a resize
        super().viewTransformChanged()
        self.place()


def _label_fill() -> QColor:
    """Behind a label: the plot background, slightly see-through, so the text reads over a curve."""
    c = QColor(PLOT_COLOURS["background"])
    c.setAlpha(200)
    return c
