"""Before Run: the learning rate of every step for each batch size of the setup, as the runs will apply it.

The rates come from core.lr_rules.sweep_preview (the trainer's own plan, so the preview is what the `lr`
step column will hold; reduce-on-plateau at its starting scale). A budget can be 100k steps per curve,
so each curve is drawn through `column_envelope`: per pixel column, the steps of its lowest and highest
rate, never more than two points a column. The preview recomputes only while shown, after the fields
have been still for DEBOUNCE_MS.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from batchlab.core import lr_rules
from batchlab.core.errors import SpecError
from batchlab.core.lr_rules import sweep_preview
from batchlab.core.spec import SweepSpec
from batchlab.gui.plot_style import BatchColours, add_legend_below, apply_plot_colours, sync_legend
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

DEBOUNCE_MS = 250  # the fields must be still this long before the preview recomputes
PREVIEW_HEIGHT_PX = 230
MIN_COLUMNS = 100  # decimation columns at least (a plot not laid out yet reports a tiny width)
LOG_Y_SPAN = 10.0  # log y by default when the rates span more than this factor (and none is 0)
X_CHOICES = [("step", "step"), ("epoch", "epoch")]


def default_batch_source(spec: SweepSpec) -> dict[int, list[int]]:
    """The real batch of every step of each run (core.lr_rules.sweep_preview_batches); {} while no batch
    schedule is set, when every step has its run's batch (an epoch's last one may be short)."""
    if getattr(spec, "batch_schedule", "constant") == "constant":
        return {}
    return {b: batches for b, (_rates, batches) in lr_rules.sweep_preview_batches(spec).items()}


def column_envelope(values, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """At most 2 x `columns` points that draw like all of `values` on a plot `columns` pixels wide.

    Returns (index, value): for each bin of consecutive indices (one pixel column), the index of its
    lowest and of its highest value, in index order. A curve shorter than 2 x `columns` comes back whole.
    """
    y = np.asarray(values, dtype=float)
    n = len(y)
    if n <= 2 * columns:
        return np.arange(n), y
    width = math.ceil(n / columns)
    bins = math.ceil(n / width)
    padded = np.full(bins * width, np.nan)
    padded[:n] = y
    grid = padded.reshape(bins, width)
    starts = np.arange(bins) * width
    lows = starts + np.nanargmin(grid, axis=1)
    highs = starts + np.nanargmax(grid, axis=1)
    index = np.stack([np.minimum(lows, highs), np.maximum(lows, highs)], axis=1).ravel()
    return index, y[index]


def log_spaced(values, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """`column_envelope` for a log step axis: the envelope's points plus `columns` steps spaced evenly in
    log(step + 1), so the first steps (a warmup) are as fine on screen as the last; at most 4 x `columns`."""
    y = np.asarray(values, dtype=float)
    index, _ = column_envelope(y, columns)
    if len(y) > 2 * columns:
        spaced = np.round(np.geomspace(1, len(y), columns)).astype(int) - 1
        index = np.union1d(index, spaced)
    return index, y[index]


class LrPreview(QWidget):
    """The rate per step of each batch size, from a spec the owner hands over (`spec_source` returns it,
    or raises SpecError while the fields are invalid)."""

    def __init__(
        self,
        spec_source: Callable[[], SweepSpec],
        parent: QWidget | None = None,
        batch_source: Callable[[SweepSpec], dict[int, list[int]]] | None = None,
    ):
        super().__init__(parent)
        self.spec_source = spec_source
        self.batch_source = batch_source or default_batch_source
        self.batches: dict[int, np.ndarray] = {}  # batch size per step, when batch_source gives it
        self.batch_curves: dict[int, pg.PlotDataItem] = {}
        self.colours = BatchColours()
        self.curves: dict[int, pg.PlotDataItem] = {}
        self.rates: dict[int, np.ndarray] = {}  # the last preview, whole (tests and the tooltip read it)
        self._log_y_chosen = False  # the user ticked or cleared log y: keep their choice
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        controls = QHBoxLayout()
        controls.addWidget(QLabel("x:"))
        self.x_axis = QComboBox()
        self.x_axis.setObjectName("preview_x")
        for value, text in X_CHOICES:
            self.x_axis.addItem(text, value)
        self.x_axis.setToolTip("step: each run's own steps; epoch: steps / steps per epoch, so batch sizes line up")
        self.x_axis.currentIndexChanged.connect(self.draw)
        controls.addWidget(self.x_axis)
        self.log_y = QCheckBox("log y")
        self.log_y.setObjectName("preview_log_y")
        self.log_y.clicked.connect(self._log_y_clicked)
        controls.addWidget(self.log_y)
        self.log_x = QCheckBox("log x")
        self.log_x.setObjectName("preview_log_x")
        self.log_x.setToolTip("Log x: warmups and early decays of every batch size show on one axis")
        self.log_x.toggled.connect(self.draw)
        controls.addWidget(self.log_x)
        controls.addStretch(1)
        layout.addLayout(controls)
        self.plot = pg.PlotWidget(title="Learning rate per step")
        self.plot.setObjectName("lr_preview")
        item = self.plot.getPlotItem()
        item.setLabel("left", "learning rate")
        item.getAxis("left").enableAutoSIPrefix(False)  # rates as typed (0.005), not "5 (x0.001)"
        item.setLabel("bottom", "step")
        item.showGrid(x=True, y=True, alpha=0.25)
        add_legend_below(item)
        self.plot.setMinimumHeight(PREVIEW_HEIGHT_PX)
        self.plot.setMinimumWidth(150)
        layout.addWidget(self.plot)
        self.batch_plot = pg.PlotWidget(title="Batch size per step")
        self.batch_plot.setObjectName("batch_preview")
        batch_item = self.batch_plot.getPlotItem()
        batch_item.setLabel("left", "batch size")
        batch_item.showGrid(x=True, y=True, alpha=0.25)
        batch_item.setXLink(item)  # the same steps (or epochs) under both plots
        self.batch_plot.setMinimumHeight(PREVIEW_HEIGHT_PX // 2)
        self.batch_plot.setVisible(False)
        layout.addWidget(self.batch_plot)
        self.note = QLabel()
        self.note.setObjectName("preview_note")
        self.note.setProperty("role", "muted")
        self.note.setWordWrap(True)
        layout.addWidget(self.note)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(DEBOUNCE_MS)
        self.timer.timeout.connect(self.update_now)
        self.plot.getPlotItem().getViewBox().sigResized.connect(lambda *_: self.draw())
        self._steps_per_epoch: dict[int, int] = {}
        self._samples = 1

    def schedule_update(self) -> None:
        """The fields changed: recompute once they have been still for DEBOUNCE_MS (only while shown)."""
        if self.isVisible():
            self.timer.start()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self.timer.start()

    def update_now(self) -> None:
        """Recompute the rates from the current spec and draw them."""
        self.timer.stop()
        try:
            spec = self.spec_source()
            rates = sweep_preview(spec)
        except SpecError as e:
            self.rates = {}
            self._steps_per_epoch = {}
            self.note.setText(f"No preview while a field is invalid ({e.field}).")
            self.draw()
            return
        self.rates = {b: np.asarray(r, dtype=float) for b, r in rates.items()}
        self.batches = {}
        if self.batch_source is not None:
            self.batches = {b: np.asarray(v, dtype=float) for b, v in self.batch_source(spec).items()}
        self._steps_per_epoch = {b: max(1, math.ceil(spec.samples / b)) for b in spec.batch_sizes}
        self._samples = spec.samples
        blank = [b for b, r in self.rates.items() if len(r) == 0]
        longest = max((len(r) for r in self.rates.values()), default=0)
        note = f"{len(self.rates)} batch sizes, up to {longest:,} steps each"
        if spec.lr_schedule == "plateau":
            note += "; plateau drawn at its starting rate (it lowers the rate when validation loss stalls)"
        if blank:
            note = "No rate set (blank learning rate: the optimizer's own default, or the model file's)."
        self.note.setText(note + ".")
        if not self._log_y_chosen:
            self.log_y.setChecked(self._log_y_sensible(spec))
        self.draw()

    def _log_y_sensible(self, spec: SweepSpec) -> bool:
        """Log y where the rates span more than LOG_Y_SPAN and none decays to 0 (cosine does)."""
        values = [r for r in self.rates.values() if len(r)]
        if not values or spec.lr_schedule == "cosine":
            return False
        low = min(float(r.min()) for r in values)
        high = max(float(r.max()) for r in values)
        return low > 0 and high / low > LOG_Y_SPAN

    def _log_y_clicked(self, _checked: bool) -> None:
        self._log_y_chosen = True
        self.draw()

    def columns(self) -> int:
        """Pixel columns of the data area: the most points a curve needs to look whole."""
        return max(MIN_COLUMNS, int(self.plot.getPlotItem().getViewBox().width()))

    def draw(self, *_args) -> None:
        """(Re)draw every curve from the last rates, decimated to the plot's width."""
        item = self.plot.getPlotItem()
        log_x, log_y = self.log_x.isChecked(), self.log_y.isChecked()
        item.setLogMode(x=log_x, y=log_y)
        per_epoch = self.x_axis.currentData() == "epoch"
        # on a log axis step s is drawn at s + 1 (steps done), so the first step has a place
        item.setLabel(
            "bottom", ("epochs done" if per_epoch else "steps done") if log_x else per_epoch * "epoch" or "step"
        )
        shown = [b for b, r in self.rates.items() if len(r)]
        self.colours.update(shown)
        for b in [b for b in self.curves if b not in shown]:
            item.removeItem(self.curves.pop(b))
            item.legend.removeItem(f"B={b}")
        columns = self.columns()
        for b in sorted(shown):
            index, y = (log_spaced if log_x else column_envelope)(self.rates[b], columns)
            x = self._x_of(b, index, log_x, per_epoch)
            if log_y:
                keep = y > 0
                x, y = x[keep], y[keep]
            pen = pg.mkPen(self.colours.colour(b), width=1.5)
            if b not in self.curves:
                self.curves[b] = item.plot(x, y, pen=pen, name=f"B={b}")
            else:
                self.curves[b].setData(x, y)
                self.curves[b].setPen(pen)
        sync_legend(item)
        item.enableAutoRange()
        self._draw_batches(log_x, per_epoch, columns)

    def _x_of(self, batch: int, index: np.ndarray, log_x: bool, per_epoch: bool) -> np.ndarray:
        """Where steps `index` of batch size `batch`'s run go on x: the step (log x: steps done, s + 1) or
        the epoch, as examples seen / samples, so a growing batch's later epochs take their real steps."""
        done = index + 1.0 if log_x else index.astype(float)
        if not per_epoch:
            return done
        sizes = self.batches.get(batch)
        if sizes is None or len(sizes) == 0:
            return done / self._steps_per_epoch.get(batch, 1)
        seen = np.concatenate([[0.0], np.cumsum(sizes)])  # examples before step s
        return seen[done.astype(int)] / self._samples

    def _draw_batches(self, log_x: bool, per_epoch: bool, columns: int) -> None:
        """The batch size per step under the rates (only with a batch source; a fixed batch is a flat line)."""
        item = self.batch_plot.getPlotItem()
        self.batch_plot.setVisible(bool(self.batches))
        item.setLogMode(x=log_x, y=False)
        item.setLabel("bottom", self.plot.getPlotItem().getAxis("bottom").labelText)
        for b in [b for b in self.batch_curves if b not in self.batches]:
            item.removeItem(self.batch_curves.pop(b))
        for b, sizes in sorted(self.batches.items()):
            index, y = (log_spaced if log_x else column_envelope)(sizes, columns)
            x = self._x_of(b, index, log_x, per_epoch)
            pen = pg.mkPen(self.colours.colour(b), width=1.5)
            if b not in self.batch_curves:
                self.batch_curves[b] = item.plot(x, y, pen=pen)
            else:
                self.batch_curves[b].setData(x, y)
                self.batch_curves[b].setPen(pen)

    def restyle(self) -> None:
        """Follow the window's theme (colours of background, axes, text and curves)."""
        apply_plot_colours(self.plot)
        apply_plot_colours(self.batch_plot)
        self.draw()
