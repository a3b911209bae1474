"""Runs that ended long ago, drawn as one curve per batch size and series instead of one per run.

A long sweep (hundreds of runs: seeds, repeats) gave every run its own pyqtgraph items in every live
plot: about six PlotDataItems a run, each three QGraphicsObjects with their pens, paths and caches.
The window grew by ~0.33 MiB a run and every auto-range and repaint walked all of them. Here a run
that has ended (and is neither among the most recent ones nor selected) hands its points to its
group (source, series, batch size): one item per group holds all of them, runs separated by NaN
(connect="finite"), step curves reduced to at most FINISHED_POINTS points a run. Items then grow
with the batch sizes, not the runs; the points kept are the runs' own data, a few KiB a run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg

# The most recent runs of a sweep that keep their own curves once ended (tests, selection and the
# current batch size's neighbours look at them one by one); older ones are drawn by their group.
KEEP_OWN = 12
FINISHED_BINS = 256  # a finished run's step curve in its group: the lowest and highest loss of each bin
FINISHED_POINTS = 2 * FINISHED_BINS

GroupKey = tuple[str, str, int]  # (source, series, batch size)


def decimate(x: np.ndarray, y: np.ndarray, bins: int = FINISHED_BINS) -> tuple[np.ndarray, np.ndarray]:
    """At most 2 * bins points of a curve: each bin's lowest and highest y, in order; NaN breaks kept."""
    n = len(y)
    if n <= 2 * bins:
        return x, y
    width = -(-n // bins)
    padded = np.full(bins * width, np.nan)
    padded[:n] = y
    rows = padded.reshape(bins, width)
    gaps = np.isnan(rows)
    low = np.argmin(np.where(gaps, np.inf, rows), axis=1)
    high = np.argmax(np.where(gaps, -np.inf, rows), axis=1)
    start = np.arange(bins) * width
    keep = np.concatenate((start + low, start + high, np.flatnonzero(np.isnan(y))))
    keep = np.unique(keep[keep < n])
    return x[keep], y[keep]


class FinishedCurves:
    """The groups of one LivePlots: each run's part, and one PlotDataItem per group that has parts."""

    def __init__(self):
        self.parts: dict[GroupKey, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        self.items: dict[GroupKey, pg.PlotDataItem] = {}
        self._dirty: set[GroupKey] = set()

    def put(self, group: GroupKey, index: int, x: np.ndarray, y: np.ndarray, thin: bool) -> None:
        """Run `index`'s points in its group (replacing what it had there); drawn at the next flush."""
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        if thin:
            x, y = decimate(x, y)
        self.parts.setdefault(group, {})[index] = (x.copy(), y.copy())
        self._dirty.add(group)

    def discard(self, group: GroupKey, index: int) -> bool:
        """Take run `index` out of its group (it is drawn on its own again); True if it was there."""
        parts = self.parts.get(group)
        if parts is None or parts.pop(index, None) is None:
            return False
        self._dirty.add(group)
        return True

    def has(self, group: GroupKey, index: int) -> bool:
        return index in self.parts.get(group, {})

    def runs(self, source: str, series: str) -> int:
        """How many runs of a source this series draws in its groups."""
        return sum(len(p) for (s, name, _b), p in self.parts.items() if s == source and name == series)

    def series(self) -> set[str]:
        """The series with points in some group."""
        return {name for (_s, name, _b), parts in self.parts.items() if parts}

    def flush(self, series_of_plot: set[str], make_item: Callable[[GroupKey], pg.PlotDataItem], remove) -> int:
        """Draw the changed groups of one plot (its series); points handed to setData. make_item(group) makes and
        adds a group's item; remove(item) takes an emptied group's item out of its plot."""
        points = 0
        for group in [g for g in self._dirty if g[1] in series_of_plot]:
            self._dirty.discard(group)
            parts = self.parts.get(group) or {}
            item = self.items.get(group)
            if not parts:
                self.parts.pop(group, None)
                if item is not None:
                    remove(self.items.pop(group))
                continue
            if item is None:
                item = self.items[group] = make_item(group)
            x, y = _joined([parts[i] for i in sorted(parts)])
            item.setData(x, y, connect="finite")
            points += len(x)
        return points

    def remove_source(self, source: str, remove) -> None:
        """Forget a source's groups; remove(item) takes each item out of its plot."""
        for group in [g for g in self.parts if g[0] == source]:
            del self.parts[group]
            self._dirty.discard(group)
        for group in [g for g in self.items if g[0] == source]:
            remove(self.items.pop(group))


def _joined(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The parts one after another, a NaN point between two (the line breaks there)."""
    xs, ys = [], []
    for x, y in parts:
        if xs:
            xs.append(np.array([np.nan]))
            ys.append(np.array([np.nan]))
        xs.append(x)
        ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)
