"""The running epoch on the epoch plots: its figures so far and the hollow markers that show them.

Loss per epoch, throughput and memory get an epoch row only when an epoch ends. Until then each
running run has a hollow marker at the running epoch: its mean loss and throughput so far
(core.figures.running_epoch, from the running epoch's own steps, so the cost does not grow with the
run) and its memory peaks so far (the child's "memory" sample on its step records). The time split's
running bar (gui/epoch_bars.py) uses the same figures. At the epoch's end the epoch row takes over.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from batchlab.core.figures import RunningEpoch, running_epoch, running_epoch_rows
from batchlab.core.model import RunData
from batchlab.gui.memory_plot import peaks_so_far
from batchlab.gui.plot_style import PLOT_COLOURS, BatchColours, run_pen

RunKey = tuple[str, int]
# Plots with a provisional point for the running epoch (hollow marker): plot id -> RunningEpoch field.
PROVISIONAL = {"loss_epoch": "train_loss", "throughput": "samples_per_s"}
# Plots that follow the running epoch's steps between epoch rows (the time split: its running bar)
FOLLOW_STEPS = (*PROVISIONAL, "epoch_split", "memory")
RUNNING_COLUMNS = ("step", "epoch", "loss", "batch_size", "wall_time", "fetch_time", "step_time", "input_wait")
TOOLTIPS = {"memory": "running epoch: memory peak so far"}
DEFAULT_TOOLTIP = "running epoch, from its steps so far"


class RunningEpochMarks:
    """Per run and plot one hollow marker; `figures` computes a run's running epoch once per snapshot."""

    def __init__(self, plots: dict[str, pg.PlotWidget], colours: BatchColours):
        self.plots = plots
        self.colours = colours
        self.markers: dict[tuple[str, int, str], pg.PlotDataItem] = {}  # (source, run, plot) -> marker
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
        if not points:
            if marker is None or not len(marker.xData if marker.xData is not None else ()):
                return False
            marker.setData([], [])
            marker.points = []
            return True
        if marker is None:
            marker = self.markers[key] = pg.PlotDataItem(symbolSize=8, pen=None)
            marker.run_key = (source, run.index)
            marker.setToolTip(TOOLTIPS.get(plot_id, DEFAULT_TOOLTIP))
            self.plots[plot_id].getPlotItem().addItem(marker)
            self.style(marker, run.batch_size, dimmed)
        if getattr(marker, "points", None) == points:
            return False  # the memory peaks so far often stay the same for many frames: nothing to redraw
        marker.points = points
        x, y, symbols = zip(*points, strict=True)
        marker.setData(list(x), list(y), symbol=list(symbols))
        return True

    def style(self, marker: pg.PlotDataItem, batch_size: int, dimmed: bool) -> None:
        """Hollow: the run's colour as outline, the plot background inside."""
        colour = self.colours.colour(batch_size)
        marker.setSymbolPen(run_pen(colour, compare=False, dimmed=dimmed, highlighted=False))
        marker.setSymbolBrush(pg.mkBrush(PLOT_COLOURS["background"]))

    def remove(self, source: str) -> None:
        for key in [k for k in self.markers if k[0] == source]:
            self.plots[key[2]].getPlotItem().removeItem(self.markers.pop(key))
        self._cache = {k: v for k, v in self._cache.items() if k[0] != source}

    def point(self, source: str, index: int, plot_id: str) -> tuple[float, float] | None:
        """(x, y) of a run's marker in a plot, None when it shows none."""
        marker = self.markers.get((source, index, plot_id))
        if marker is None or marker.xData is None or not len(marker.xData):
            return None
        return float(np.asarray(marker.xData)[0]), float(np.asarray(marker.yData)[0])
