"""Where a batch-size schedule changed a run's batch: a small triangle on its loss curve.

Runs with `--batch-schedule grow` or `two_phase` change their batch at epoch boundaries; the steps
carry each step's batch. The changes are core.batch_rules.batch_changes (the same rule as the
report's "batch 16 -> 32 at step 64 (epoch 2)" line), read from the first step of each epoch only:
those rows are found by binary search on the (non-decreasing) epoch column, so the cost follows the
number of epochs, not the run's steps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from batchlab.core.batch_rules import batch_changes
from batchlab.core.model import RunData
from batchlab.gui.plot_style import PLOT_COLOURS, run_brush, run_pen
from PySide6.QtGui import QColor

LEGEND_TEXT = "batch size changed"
SYMBOL = "t1"  # a triangle pointing up: the batch grew (the usual case; the tooltip says which way)


def epoch_first_rows(epoch: np.ndarray) -> np.ndarray:
    """Row of each epoch's first step in a non-decreasing epoch column (binary search per epoch)."""
    if not len(epoch):
        return np.zeros(0, dtype=np.int64)
    wanted = np.arange(int(epoch[0]), int(epoch[-1]) + 1)
    rows = np.searchsorted(epoch, wanted, side="left")
    return np.unique(rows[rows < len(epoch)])


def run_batch_changes(run: RunData, n: int) -> list[tuple[int, int, int, int, int]]:
    """(row, step, epoch, old batch, new batch) of each change in the first n step rows of a run."""
    steps = run.steps
    rows = epoch_first_rows(np.asarray(steps["epoch"][:n]))
    if len(rows) < 2:
        return []
    changes = batch_changes(steps["step"][rows], steps["epoch"][rows], steps["batch_size"][rows])
    at = {int(s): int(r) for s, r in zip(steps["step"][rows], rows, strict=True)}
    return [(at[s], s, e, old, new) for s, e, old, new in changes]


class BatchMarks:
    """Per run and loss plot: a triangle at each step where its batch size changed."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, int, str], pg.PlotDataItem] = {}
        self.samples: dict[str, pg.PlotDataItem] = {}  # plot id -> its grey legend sample

    def draw(
        self,
        plot: pg.PlotItem,
        plot_id: str,
        run: RunData,
        key: tuple[str, int],
        n: int,
        x_of: Callable[[np.ndarray], np.ndarray],
        colour: QColor,
        dimmed: bool = False,
    ) -> bool:
        """Bring one run's marks in one plot to its first n step rows; x_of maps step rows to the plot's x."""
        mark_key = (*key, plot_id)
        item = self.items.get(mark_key)
        changes = run_batch_changes(run, n)
        if not changes:
            if item is None or item.xData is None or not len(item.xData):
                return False
            item.setData([], [])
            return True
        rows = np.array([c[0] for c in changes], dtype=np.int64)
        x = x_of(rows)
        y = np.asarray(run.steps["loss"][rows], dtype=float)
        if item is None:
            item = self.items[mark_key] = pg.PlotDataItem(pen=None, symbol=SYMBOL, symbolSize=10)
            item.run_key = key
            plot.addItem(item)
            self._add_legend_sample(plot, plot_id)
        item.setZValue(15)
        item.setSymbolPen(run_pen(QColor(PLOT_COLOURS["foreground"]), compare=False, dimmed=dimmed, highlighted=False))
        item.setSymbolBrush(run_brush(colour, dimmed=dimmed))
        item.setData(x, y)
        item.setToolTip(
            "\n".join(f"batch {old} -> {new} at step {s:,} (epoch {e + 1})" for _r, s, e, old, new in changes)
        )
        item.changes = changes
        return True

    def _add_legend_sample(self, plot: pg.PlotItem, plot_id: str) -> None:
        if plot_id in self.samples or plot.legend is None:
            return
        self.samples[plot_id] = pg.PlotDataItem([0], [0], pen=None, symbol=SYMBOL)
        self.restyle_legend()
        plot.legend.addItem(self.samples[plot_id], LEGEND_TEXT)

    def restyle_legend(self) -> None:
        grey = QColor(PLOT_COLOURS["neutral"])
        for sample in self.samples.values():
            sample.setSymbolPen(pg.mkPen(PLOT_COLOURS["foreground"]))
            sample.setSymbolBrush(pg.mkBrush(grey))

    def remove(self, plots: dict[str, pg.PlotWidget], source: str) -> None:
        for mark_key in [k for k in self.items if k[0] == source]:
            plots[mark_key[2]].getPlotItem().removeItem(self.items.pop(mark_key))
        needed = {k[2] for k in self.items}
        for plot_id in [p for p in self.samples if p not in needed]:
            legend = plots[plot_id].getPlotItem().legend
            if legend is not None:
                legend.removeItem(self.samples.pop(plot_id))
            else:
                self.samples.pop(plot_id)

    def marks(self, plot_id: str, key: tuple[str, int]) -> list[tuple[float, float, str]]:
        """(x, y, text) of each change drawn for a run in a plot (for tests)."""
        item = self.items.get((*key, plot_id))
        if item is None or item.xData is None:
            return []
        texts = [f"batch {old} -> {new} at step {s:,}" for _r, s, _e, old, new in item.changes]
        return list(zip(item.xData.tolist(), item.yData.tolist(), texts, strict=True))
