"""A ViewBox whose auto-range keeps its range while a run trains (gui/axis_range.py), so axes re-render rarely."""

from __future__ import annotations

import math

import pyqtgraph as pg
from batchlab.gui.axis_range import X_HEADROOM, Y_HEADROOM, sticky_range


class StickyViewBox(pg.ViewBox):
    """pyqtgraph's ViewBox; while `sticky` is True its auto-range moves only when the data leaves the range
    (or the range becomes far too loose), with headroom for growth. With sticky False it fits the data
    exactly, as pyqtgraph does: a finished sweep, a file opened, an export. A user's own zoom or pan turns
    auto-range off as before; the "A" button and "View All" fit the data again.
    """

    sticky = False
    x_upper: float | None = None  # the largest x the data can reach (planned epochs): no headroom past it
    _auto_ranging = False

    def updateAutoRange(self) -> None:  # noqa: N802 (pyqtgraph override)
        self._auto_ranging = True
        try:
            super().updateAutoRange()
        finally:
            self._auto_ranging = False

    def setRange(self, rect=None, xRange=None, yRange=None, padding=None, update=True, disableAutoRange=True):  # noqa: N802,N803
        if self.sticky and self._auto_ranging:
            target = self.targetRange()
            log_x, log_y = self.state["logMode"]
            if xRange is not None:
                upper = self.x_upper
                if upper is not None and log_x:
                    upper = math.log10(upper) if upper > 0 else None
                xRange = self._sticky(0, xRange, target[0], X_HEADROOM, log_x, upper)
            if yRange is not None:
                yRange = self._sticky(1, yRange, target[1], Y_HEADROOM, log_y)
        super().setRange(rect, xRange, yRange, padding, update, disableAutoRange)

    def _sticky(
        self, axis: int, padded, current, headroom: float, log: bool, upper: float | None = None
    ) -> tuple[float, float]:
        """The sticky range for auto-range's padded request on one axis (the padding taken off again)."""
        pad = self.suggestPadding(axis)
        lo, hi = float(padded[0]), float(padded[1])
        span = (hi - lo) / (1 + 2 * pad)
        data = (lo + pad * span, hi - pad * span)
        return sticky_range(
            data, (float(current[0]), float(current[1])), padding=pad, headroom=headroom, log=log, upper=upper
        )
