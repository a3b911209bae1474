"""The epoch-time-split bars of the live plots: per run, mean epoch time split into compute, input wait and other."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from batchlab.core.model import RunData, SweepData
from batchlab.gui.plot_style import PLOT_COLOURS, BatchColours, run_pen, sync_legend
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

SEGMENTS = (("compute", "compute_time"), ("input wait", "input_wait_time"), ("other", None))
# The "other" part of an epoch: a grey with >= 3:1 contrast against both themes' plot backgrounds
# (3.1:1 on the light white, 5.2:1 on the dark #1F2023; the previous #BBBBBB was 1.9:1 on white)
OTHER_COLOUR = "#929292"


class EpochBars:
    """Stacked bars at log2(batch size), one group per source and seed; `draw` replaces a source's bars."""

    def __init__(self, plot_item: pg.PlotItem, colours: BatchColours):
        self.plot_item = plot_item
        self.colours = colours
        self.items: dict[tuple[str, str], pg.BarGraphItem] = {}
        self.samples: dict[str, pg.BarGraphItem] = {}  # segment -> its legend sample
        for seg, _ in SEGMENTS:
            self.samples[seg] = pg.BarGraphItem(x=[0], height=[1], width=1)
            plot_item.legend.addItem(self.samples[seg], seg)
        self.restyle_legend()
        sync_legend(plot_item)

    def restyle_legend(self) -> None:
        """Legend samples in the theme's neutral colour (again after a theme switch)."""
        grey = QColor(PLOT_COLOURS["neutral"])
        for seg, sample in self.samples.items():
            sample.setOpts(brush=segment_brush(seg, grey, False), pen=pg.mkPen(PLOT_COLOURS["foreground"]))

    def remove(self, source: str) -> None:
        for key in [k for k in self.items if k[0] == source]:
            self.plot_item.removeItem(self.items.pop(key))

    def draw(
        self,
        source: str,
        data: SweepData,
        sources: list[str],
        rows: Callable[[RunData], int],
        selection: set[tuple[str, int]],
    ) -> None:
        """Bars of this source's runs over their first rows(run) epochs (the live plots' snapshot)."""
        runs = [r for r in data.ordered_runs() if rows(r)]
        seeds = sorted({r.seed for r in data.runs.values()}) or [0]
        n_groups = len(seeds) * max(1, len(sources))
        width = 0.8 / n_groups
        group_of_source = sorted(sources).index(source) if source in sources else 0
        xs, bottoms, heights, colours = [], {s: [] for s, _ in SEGMENTS}, {s: [] for s, _ in SEGMENTS}, []
        for run in runs:
            n = rows(run)
            group = group_of_source * len(seeds) + seeds.index(run.seed)
            xs.append(np.log2(run.batch_size) - 0.4 + width * (group + 0.5))
            colours.append((run, self.colours.colour(run.batch_size)))
            epoch_time = float(np.nanmean(run.epochs["epoch_time"][:n]))
            bottom = 0.0
            for seg, col in SEGMENTS:
                value = float(np.nanmean(run.epochs[col][:n])) if col else epoch_time - bottom
                value = max(0.0, value) if np.isfinite(value) else 0.0
                bottoms[seg].append(bottom)
                heights[seg].append(value)
                bottom += value
        for seg, _ in SEGMENTS:
            key = (source, seg)
            item = self.items.get(key)
            if item is None:
                item = self.items[key] = pg.BarGraphItem(x=[], height=[], width=width)
                self.plot_item.addItem(item)
            brushes, pens = [], []
            for run, colour in colours:
                dimmed = bool(selection) and (source, run.index) not in selection
                brushes.append(segment_brush(seg, colour, dimmed))
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


def segment_brush(segment: str, colour: QColor, dimmed: bool):
    c = QColor(OTHER_COLOUR) if segment == "other" else QColor(colour)
    if dimmed:
        c.setAlpha(40)
    brush = pg.mkBrush(c)
    if segment == "input wait":
        brush.setStyle(Qt.BrushStyle.BDiagPattern)
    return brush
