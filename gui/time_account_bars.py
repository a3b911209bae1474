"""The Summary tab's time account: one stacked horizontal bar per run, its wall time in named parts.

The parts and their seconds are core.analysis.time_account's, the same `batchlab report` prints and the
explanation cites; the bar's length is the run's wall time (request to end), its last segment the
unaccounted rest. One colour per part, in the account's order, named in the legend.
"""

from __future__ import annotations

import math
from collections import Counter

import pyqtgraph as pg
from batchlab.core.analysis.time_account import PART_NAMES, PART_WORDS, TimeAccount, sweep_accounts
from batchlab.core.model import SweepData
from batchlab.gui.plot_axes import make_plot
from batchlab.gui.plot_style import remove_items, sync_legend
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

# One colour per part, in PART_NAMES order (one-time costs warm, training blue-green, per-epoch costs purple),
# then the unaccounted rest in grey.
PART_COLOURS = {
    "startup": "#8c564b",
    "model": "#c49c94",
    "pipeline": "#e377c2",
    "tracing": "#d62728",
    "compute": "#1f77b4",
    "input_wait": "#17becf",
    "loop": "#aec7e8",
    "stalls": "#ff7f0e",
    "validation": "#2ca02c",
    "pipeline_close": "#9467bd",
    "hooks": "#bcbd22",
    "unaccounted": "#7f7f7f",
}
SHORT_WORDS = {**{k: PART_WORDS[k].split(" (")[0] for k in PART_NAMES}, "unaccounted": "unaccounted"}
BAR_HEIGHT = 0.6  # of a row
AXIS_FONT_SCALE = 0.85
AXIS_MARGIN_PX = 14  # the left axis's room beyond its longest run name (tick mark and gap)
PLOT_MIN_HEIGHT_PX = 80
AXIS_HEIGHT_PX = 40  # the time axis and margins
BAR_ROW_PX = 26  # height per run the bars never exceed
MIN_ROW_PX = 15  # height per run the bars get up to PLOT_MIN_CAP_PX: a run's name in the axis's font
PLOT_MIN_CAP_PX = 110  # more would not fit 1024x700; pyqtgraph then leaves out names that would overlap
TITLE = "Where each run's time went (s, from its request to its end):"


class TimeAccountBars:
    """A plot of stacked bars, one row per run (the main sweep's, then a comparison's), and its legend: a line
    of coloured names under it, which wraps (a plot legend of twelve entries took the bars' room at 1024x700).
    `widget` holds both; `draw(sources)` draws them again."""

    def __init__(self) -> None:
        self.plot_widget = make_plot("", "", None, "", None)  # the title is the legend's first words: room for the bars
        plot = self.plot_widget.getPlotItem()
        plot.showGrid(x=True, y=False)
        axis = plot.getAxis("left")
        font = QFont(axis.font())
        font.setPointSizeF(font.pointSizeF() * AXIS_FONT_SCALE)  # a run's name fits MIN_ROW_PX
        axis.setStyle(tickFont=font)
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.widget = _Fitted(self.legend)
        layout = QVBoxLayout(self.widget)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.plot_widget, 1)
        layout.addWidget(self.legend)
        self.plot_widget.setMinimumHeight(1)  # until there are bars (0 would mean "the plot's own minimum", ~70 px)
        self.legend.hide()  # nothing to name yet
        self._items: list[pg.GraphicsObject] = []
        self.rows: list[tuple[str, TimeAccount]] = []  # (source, account) per bar, bottom to top (for tests)
        self.shown: list[str] = []  # the parts drawn, in the legend's order

    def draw(self, sources: dict[str, SweepData]) -> None:
        self.draw_accounts([(s, a) for s, d in sources.items() for a in sweep_accounts(d.ordered_runs())])

    def show_computing(self, text: str) -> None:
        """No bars while the accounts are computed (never the last data's): the legend line says so."""
        remove_items(self.plot_widget.getPlotItem(), self._items)
        self._items, self.rows, self.shown = [], [], []
        self.legend.setText(f"<b>{TITLE}</b>&nbsp; {text}")
        self.legend.setVisible(True)
        self.widget.fit_legend()

    def draw_accounts(self, rows: list[tuple[str, TimeAccount]]) -> None:
        """Draw these (source, account) rows, bottom to top (core.analysis.time_account.sweep_accounts')."""
        plot = self.plot_widget.getPlotItem()
        remove_items(plot, self._items)
        self._items = []
        self.rows = rows
        labels = []
        repeats = Counter(a.batch_size for _, a in self.rows)  # another run of the same batch size: name the run
        for row, (source, account) in enumerate(self.rows):
            name = f"batch {account.batch_size}" + (f" (run {account.run})" if repeats[account.batch_size] > 1 else "")
            labels.append((row, name if source == "main" else f"{name}, {source}"))
        left = [0.0] * len(self.rows)
        shown: list[str] = []
        for part in (*PART_NAMES, "unaccounted"):
            widths = [max(0.0, _seconds(a, part)) for _, a in self.rows]
            if not any(widths):
                continue  # a part no run has stays out of the legend
            bars = pg.BarGraphItem(
                x0=list(left),
                y=list(range(len(self.rows))),
                height=BAR_HEIGHT,
                width=widths,
                brush=PART_COLOURS[part],
                pen=pg.mkPen(PART_COLOURS[part]),
            )
            bars.part = part
            plot.addItem(bars)
            shown.append(part)
            self._items.append(bars)
            left = [x + w for x, w in zip(left, widths, strict=True)]
        axis = plot.getAxis("left")
        axis.setTicks([labels, []])
        # pyqtgraph leaves out a tick label wider than the axis: make room for the longest name
        metrics = QFontMetrics(axis.style.get("tickFont") or axis.font())
        longest = max((metrics.horizontalAdvance(text) for _, text in labels), default=0)
        axis.setWidth(longest + AXIS_MARGIN_PX)
        plot.setYRange(-0.7, max(len(self.rows), 1) - 0.3, padding=0)
        # no taller than its bars need: the four plots above keep the room
        self.plot_widget.setMaximumHeight(max(PLOT_MIN_HEIGHT_PX, AXIS_HEIGHT_PX + BAR_ROW_PX * len(self.rows)))
        # room for every run's name (empty: no room asked)
        rows_px = AXIS_HEIGHT_PX + MIN_ROW_PX * len(self.rows)
        self.plot_widget.setMinimumHeight(min(max(PLOT_MIN_HEIGHT_PX, rows_px), PLOT_MIN_CAP_PX) if self.rows else 1)
        plot.enableAutoRange(axis=pg.ViewBox.XAxis)
        sync_legend(plot)
        self.legend.setText(
            f"<b>{TITLE}</b>&nbsp; "
            + "&nbsp; ".join(
                f'<span style="color:{PART_COLOURS[p]}">&#9632;</span>&nbsp;{_unbroken(SHORT_WORDS[p])}' for p in shown
            )
        )
        self.shown = shown
        self.legend.setVisible(bool(shown))
        self.widget.fit_legend()

    def segments(self, row: int) -> dict[str, float]:
        """The seconds each part's segment of bar `row` spans (for tests)."""
        out = {}
        for item in self._items:
            opts = item.opts
            out[item.part] = float(opts["width"][row])
        return out


def _seconds(account: TimeAccount, part: str) -> float:
    value = account.unaccounted if part == "unaccounted" else account.parts[part]
    return value if math.isfinite(value) else 0.0


class _Fitted(QWidget):
    """The plot and its legend; the legend keeps the height its wrapped text needs at the current width (a
    word-wrapped label does not tell a grid layout its height, and was overlapped by the plot at 1024x700)."""

    def __init__(self, legend: QLabel):
        super().__init__()
        self.legend = legend

    def fit_legend(self) -> None:
        text = self.legend.text()
        self.legend.setMinimumHeight(self.legend.heightForWidth(max(1, self.legend.width())) if text else 0)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self.fit_legend()


def _unbroken(words: str) -> str:
    """A legend entry that wraps as a whole."""
    return words.replace(" ", "&nbsp;")
