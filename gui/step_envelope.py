"""A run's loss-per-step curve reduced to at most two points per bin of steps, kept up to date incrementally.

A batch-8 run makes hundreds of step rows a second; handing every row to the plot on every refresh
makes each refresh cost more the longer the run gets. `StepEnvelope` keeps, per bin of consecutive
steps, the rows of the bin's lowest and highest loss (the peak envelope a screen pixel column
shows). A bin holds `width` rows; when there would be more than `max_bins` bins, the width doubles
and the bins are rebuilt (a vectorised pass; the total cost over a run stays linear in its rows).
So one update costs the new rows plus at most 2 * max_bins points for the plot, whatever the
curve's length. A run shorter than max_bins steps is drawn exactly.

Bins never span a pause (a validation pass or other work between epochs): `gap_before` marks the
row after one, and on a wall-clock x axis the curve is broken there (a NaN point) instead of
drawn as a straight line across the pause.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

MAX_BINS = 2048  # more than the pixel columns of a plot on any screen
# A step row starts a new stretch when the time since the previous row exceeds both this many
# seconds and PAUSE_FACTOR times the row's own step and fetch time (NaN times: the jump alone).
PAUSE_MIN_S = 0.1
PAUSE_FACTOR = 3.0


def pause_before(wall: np.ndarray, busy: np.ndarray, previous_wall: float | None) -> np.ndarray:
    """True for each row whose start came after a pause: wall-clock gap > PAUSE_MIN_S and PAUSE_FACTOR x busy time.

    wall: each row's wall_time (s, at the end of the step); busy: its step_time + fetch_time (s; NaN unknown);
    previous_wall: the wall_time of the row before the first one (None: the run's first row, never a pause).
    """
    before = np.empty(len(wall))
    if len(wall):
        before[0] = np.nan if previous_wall is None else previous_wall
        before[1:] = wall[:-1]
    dt = wall - before
    busy = np.where(np.isfinite(busy), busy, 0.0)
    with np.errstate(invalid="ignore"):
        return (dt > PAUSE_MIN_S) & (dt > PAUSE_FACTOR * busy + busy)


class StepEnvelope:
    """Rows to draw of one run's loss-per-step curve; `update(steps, n)` takes rows up to n."""

    def __init__(self, max_bins: int = MAX_BINS):
        if max_bins < 2:
            raise ValueError(f"max_bins must be >= 2, got {max_bins}")
        self.max_bins = max_bins
        self.width = 1
        self.rows = 0  # rows taken so far
        self._starts = np.zeros(0, dtype=np.int64)  # first row of each bin
        self._gap = np.zeros(0, dtype=bool)  # the bin starts after a pause
        self._lo = np.zeros(0, dtype=np.int64)  # row of the bin's lowest loss
        self._hi = np.zeros(0, dtype=np.int64)  # row of its highest
        self._pauses = np.zeros(0, dtype=bool)  # per row taken: a pause came before it

    @property
    def bins(self) -> int:
        return len(self._starts)

    def update(self, steps: Mapping[str, np.ndarray], n: int | None = None) -> bool:
        """Take the rows from the last update up to n (default all); True if the curve changed."""
        loss = steps["loss"]
        n = len(loss) if n is None else min(n, len(loss))
        if n <= self.rows:
            return False
        wall = np.asarray(steps["wall_time"][self.rows : n], dtype=float)
        busy = np.asarray(steps["step_time"][self.rows : n], dtype=float) + np.asarray(
            steps["fetch_time"][self.rows : n], dtype=float
        )
        previous = float(steps["wall_time"][self.rows - 1]) if self.rows else None
        self._pauses = np.concatenate([self._pauses, pause_before(wall, busy, previous)])
        # The last bin may be partly filled: take it again with the new rows.
        first = int(self._starts[-1]) if self.bins else 0
        keep = self.bins - 1 if self.bins else 0
        self.rows = n
        starts = self._bin_starts(first, n)
        if keep + len(starts) > self.max_bins:
            while True:
                self.width *= 2
                starts = self._bin_starts(0, n)
                if len(starts) <= self.max_bins:
                    break
            keep = 0
        lo, hi = _extremes(np.asarray(loss[:n], dtype=float), starts, n)
        self._starts = np.concatenate([self._starts[:keep], starts])
        self._gap = np.concatenate([self._gap[:keep], self._pauses[starts]])
        self._lo = np.concatenate([self._lo[:keep], lo])
        self._hi = np.concatenate([self._hi[:keep], hi])
        return True

    def _bin_starts(self, first: int, n: int) -> np.ndarray:
        """First rows of bins of `width` rows over rows first..n-1, a new bin after every pause."""
        breaks = first + np.flatnonzero(self._pauses[first:n])
        edges = np.concatenate([[first], breaks[breaks > first], [n]])
        parts = [np.arange(a, b, self.width) for a, b in zip(edges[:-1], edges[1:], strict=True)]
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)

    def draw_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows to draw in order, True where a pause comes before that row): at most 2 rows per bin."""
        pair = np.stack([np.minimum(self._lo, self._hi), np.maximum(self._lo, self._hi)], axis=1)
        single = self._lo == self._hi
        rows = pair.ravel()
        keep = np.ones(len(rows), dtype=bool)
        keep[1::2] = ~single
        gap = np.zeros(len(rows), dtype=bool)
        gap[0::2] = self._gap
        return rows[keep], gap[keep]


def _extremes(loss: np.ndarray, starts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row of the lowest and highest finite loss in each bin [starts[i], starts[i+1]) (the first row if none)."""
    if not len(starts):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lo_row = starts[0]
    values = loss[lo_row:n]
    counts = np.diff(np.concatenate([starts, [n]]))
    bin_of = np.repeat(np.arange(len(starts)), counts)
    finite = np.isfinite(values)
    # Sorting by (bin, loss) puts each bin's lowest loss first and highest last; NaNs sort last, so
    # a NaN (a diverged step) shows only in a bin that has nothing else.
    order = np.lexsort((np.where(finite, values, np.inf), bin_of))
    ends = np.cumsum(counts)
    lo = order[ends - counts]
    finite_count = np.add.reduceat(finite.astype(np.int64), ends - counts)
    hi_index = ends - counts + np.maximum(finite_count, 1) - 1
    hi = order[hi_index]
    return lo + lo_row, hi + lo_row
