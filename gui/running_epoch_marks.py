"""The running epoch on the epoch plots: its figures so far and the hollow markers that show them.

Loss per epoch, throughput and memory get an epoch row only when an epoch ends. Until then each
running run has a hollow marker at the running epoch: its mean loss and throughput so far
(core.figures.running_epoch, from the running epoch's own steps, so the cost does not grow with the
run) and its memory peaks so far (the child's "memory" sample on its step records). The time split's
running bar (gui/epoch_bars.py) uses the same figures. At the epoch's end the epoch row takes over.
"""

from __future__ import annotations

import pyqtgraph as pg
from batchlab.core.figures import RunningEpoch, running_epoch, running_epoch_rows
from batchlab.core.model import RunData
from batchlab.gui.memory_plot import peaks_so_far
from batchlab.gui.plot_style import PLOT_COLOURS, BatchColours, run_pen
from pyqtgraph.graphicsItems.ScatterPlotItem import Symbols
from PySide6.QtCore import QPointF
from PySide6.QtGui import QBrush, QPen, QTransform
from PySide6.QtWidgets import QGraphicsPathItem

RunKey = tuple[str, int]
# Plots with a provisional point for the running epoch (hollow marker): plot id -> RunningEpoch field.
PROVISIONAL = {"loss_epoch": "train_loss", "throughput": "samples_per_s"}
# Plots that follow the running epoch's steps between epoch rows (the time split: its running bar)
FOLLOW_STEPS = (*PROVISIONAL, "epoch_split", "memory")
RUNNING_COLUMNS = ("step", "epoch", "loss", "batch_size", "wall_time", "fetch_time", "step_time", "input_wait")
TOOLTIPS = {"memory": "running epoch: memory peak so far"}
DEFAULT_TOOLTIP = "running epoch, from its steps so far"


class MarkSpot(QGraphicsPathItem):
    """One hollow marker: a pyqtgraph symbol's outline in screen pixels at a data point (its position).

    Qt bounds and paints it in C++ (ItemIgnoresTransformations keeps it 8 px at any zoom); a
    single-point ScatterPlotItem cost ~0.5 ms of Python per repaint of its plot, and its bounds were
    asked on every repaint. pyqtgraph's auto-range sees it through dataBounds and pixelPadding.
    """

    size = 8.0

    def __init__(self, symbol: str):
        super().__init__()
        self.setFlag(self.GraphicsItemFlag.ItemIgnoresTransformations)
        self.symbol = ""
        self.set_symbol(symbol)

    def set_symbol(self, symbol: str) -> None:
        self.symbol = symbol
        self.setPath(QTransform.fromScale(self.size, self.size).map(Symbols[symbol]))

    def dataBounds(self, axis: int, frac: float = 1.0, orthoRange=None) -> tuple[float, float]:  # noqa: N802,N803
        """The point itself (its position, in the item's own coordinates)."""
        return (0.0, 0.0)

    def pixelPadding(self) -> float:  # noqa: N802 (pyqtgraph hook)
        return self.size / 2 + self.pen().widthF()


class RunningMark:
    """A run's hollow markers in one plot: a MarkSpot per point, moved with setPos.

    The marker moves every frame while its epoch runs. Setting a PlotDataItem's data for it cost
    ~0.6 ms a plot (pyqtgraph rebuilds its spots and their sizes); moving a spot is a position change
    (its view is told its bounds changed, and Qt repaints the old and new place only).
    """

    def __init__(self, plot_item: pg.PlotItem, tooltip: str):
        self.plot_item = plot_item
        self.tooltip = tooltip
        self.spots: list[MarkSpot] = []
        self.points: list[tuple[float, float, str]] = []
        self.looks: tuple[QPen, QBrush] | None = None

    def set_points(self, points: list[tuple[float, float, str]]) -> bool:
        """Show these (x, y, symbol) points (none: hide every spot); True if that changes what is drawn."""
        self.points = points
        changed = False
        view = self.plot_item.getViewBox()
        while len(self.spots) < len(points):
            spot = MarkSpot(points[len(self.spots)][2])
            spot.setToolTip(self.tooltip)
            spot.setVisible(False)
            if self.looks is not None:
                spot.setPen(self.looks[0])
                spot.setBrush(self.looks[1])
            self.plot_item.addItem(spot)
            self.spots.append(spot)
        for i, spot in enumerate(self.spots):
            shown = i < len(points)
            moved = False
            if shown:
                x, y, symbol = points[i]
                if spot.symbol != symbol:
                    spot.set_symbol(symbol)
                    changed = True
                if spot.pos() != QPointF(x, y):  # Qt's own (fuzzy) comparison: the same place is no move
                    spot.setPos(x, y)
                    changed = moved = True
            if spot.isVisible() != shown:
                spot.setVisible(shown)
                changed = moved = True
            if moved:  # the view's auto-range counts only shown spots, where they are now
                view.itemBoundsChanged(spot)
        return changed

    def style(self, pen: QPen, brush: QBrush) -> None:
        self.looks = (pen, brush)
        for spot in self.spots:
            spot.setPen(pen)
            spot.setBrush(brush)

    def remove(self) -> None:
        for spot in self.spots:
            self.plot_item.removeItem(spot)
        self.spots = []

    def first(self) -> tuple[float, float] | None:
        """(x, y) of the first point shown, None when none is."""
        return (float(self.points[0][0]), float(self.points[0][1])) if self.points else None


class RunningEpochMarks:
    """Per run and plot one hollow marker; `figures` computes a run's running epoch once per snapshot."""

    def __init__(self, plots: dict[str, pg.PlotWidget], colours: BatchColours):
        self.plots = plots
        self.colours = colours
        self.markers: dict[tuple[str, int, str], RunningMark] = {}  # (source, run, plot) -> marker
        self._cache: dict[RunKey, tuple[tuple[int, int], RunningEpoch | None]] = {}

    def figures(self, source: str, run: RunData, n_steps: int, n_epochs: int) -> RunningEpoch | None:
        """The running epoch's figures over the first n_steps / n_epochs rows (None when no epoch is running),
        from its own steps only (core.figures.running_epoch_rows); cached for these row counts."""
        if run.status != "running":
            return None
        cached = self._cache.get((source, run.index))
        if cached is not None and cached[0] == (n_steps, n_epochs):
            return cached[1]
        figures = None
        if n_steps:
            start = running_epoch_rows(run.steps["epoch"][:n_steps])
            steps = {c: run.steps[c][start:n_steps] for c in RUNNING_COLUMNS if c in run.steps.names()}
            epochs = {c: run.epochs[c][:n_epochs] for c in ("epoch", "wall_time")}
            figures = running_epoch(steps, epochs)
        self._cache[(source, run.index)] = ((n_steps, n_epochs), figures)
        return figures

    def draw(self, source: str, run: RunData, plot_id: str, figures: RunningEpoch | None, dimmed: bool) -> bool:
        """Bring a run's marker in one plot to its running epoch; True if that changed what is shown."""
        if plot_id == "memory":
            points = peaks_so_far(run, figures)
        elif figures is not None:
            points = [(figures.epoch + 1.0, float(getattr(figures, PROVISIONAL[plot_id])), "o")]
        else:
            points = []
        key = (source, run.index, plot_id)
        marker = self.markers.get(key)
        if marker is None:
            if not points:
                return False
            marker = self.markers[key] = RunningMark(
                self.plots[plot_id].getPlotItem(), TOOLTIPS.get(plot_id, DEFAULT_TOOLTIP)
            )
            self.style(marker, run.batch_size, dimmed)
        if not points and run.status != "running":  # ended: its epoch rows took the markers' place; they go
            self.markers.pop(key).remove()
            self._cache.pop((source, run.index), None)
            return bool(marker.points)
        if marker.points == points:
            return False  # the memory peaks so far often stay the same for many frames: nothing to redraw
        return marker.set_points(points)

    def style(self, marker: RunningMark, batch_size: int, dimmed: bool) -> None:
        """Hollow: the run's colour as outline, the plot background inside."""
        colour = self.colours.colour(batch_size)
        marker.style(
            run_pen(colour, compare=False, dimmed=dimmed, highlighted=False), pg.mkBrush(PLOT_COLOURS["background"])
        )

    def remove(self, source: str) -> None:
        for key in [k for k in self.markers if k[0] == source]:
            self.markers.pop(key).remove()
        self._cache = {k: v for k, v in self._cache.items() if k[0] != source}

    def point(self, source: str, index: int, plot_id: str) -> tuple[float, float] | None:
        """(x, y) of a run's marker in a plot, None when it shows none."""
        marker = self.markers.get((source, index, plot_id))
        return None if marker is None else marker.first()
