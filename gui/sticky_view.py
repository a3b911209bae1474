"""A ViewBox whose auto-range keeps its range while a run trains (gui/axis_range.py), so axes re-render rarely."""

from __future__ import annotations

import math

import pyqtgraph as pg
from batchlab.gui.axis_range import X_HEADROOM, Y_HEADROOM, sticky_range
from PySide6.QtCore import QRectF

Span = tuple[float, float] | None


class StickyViewBox(pg.ViewBox):
    """pyqtgraph's ViewBox; while `sticky` is True its auto-range moves only when the data leaves the range
    (or the range becomes far too loose), with headroom for growth. With sticky False it fits the data
    exactly, as pyqtgraph does: a finished sweep, a file opened, an export. A user's own zoom or pan turns
    auto-range off as before; the "A" button and "View All" fit the data again.
    """

    sticky = False
    x_upper: float | None = None  # the largest x the data can reach (planned epochs): no headroom past it
    _auto_ranging = False
    _bounds: dict | None = None  # while sticky: child -> (x span, y span) in view coordinates, until they change

    def itemBoundsChanged(self, item) -> None:  # noqa: N802 (pyqtgraph hook)
        if self._bounds is not None:
            self._bounds.pop(item, None)
        super().itemBoundsChanged(item)

    def removeItem(self, item) -> None:  # noqa: N802 (pyqtgraph override)
        if self._bounds is not None:
            self._bounds.pop(item, None)
        super().removeItem(item)

    def childrenBounds(self, frac=None, orthoRange=(None, None), items=None):  # noqa: N802,N803 (pyqtgraph override)
        """pyqtgraph's bounds of the children, computed per child only when that child's bounds changed.

        The auto-range of a live plot runs every frame, and pyqtgraph asks every child for its data
        bounds each time (0.3-0.5 ms a plot, a quarter of a live plot's update) though a frame changes
        one or two of them. While sticky, each child's bounds are kept until pyqtgraph says they changed
        (itemBoundsChanged: its data was set or it moved); visibility and pixel padding (symbols, pens) are
        asked every time, and the union and the padding are worked out as pyqtgraph does, over the whole range.
        """
        whole = frac is None or all(f == 1.0 for f in frac)
        if not self.sticky or items is not None or not whole or any(r is not None for r in orthoRange):
            self._bounds = None
            return super().childrenBounds(frac, orthoRange, items)
        if self._bounds is None:
            self._bounds = {}
        spans = []
        for item in self.addedItems:
            if not item.isVisible() or item.scene() is not self.scene():
                continue  # asked every time: EpochBars hides a bar item without changing its data
            if getattr(item, "bounds_follow_others", False):  # a plot_style.ZeroAnchor: asked every time
                bounds = self._child_bounds(item)
            elif item in self._bounds:
                bounds = self._bounds[item]
            else:
                bounds = self._bounds[item] = self._child_bounds(item)
            if bounds is not None:
                x, y = bounds
                spans.append((x, y, float(item.pixelPadding()) if hasattr(item, "pixelPadding") else 0.0))
        out: list[list[float] | None] = [None, None]
        for axis in (0, 1):
            ranges = [(span[axis], span[2]) for span in spans if span[axis] is not None]
            if not ranges:
                continue
            lo, hi = min(r[0] for r, _ in ranges), max(r[1] for r, _ in ranges)
            pixels = self.width() if axis == 0 else self.height()
            if pixels > 0:  # pixel padding in data units of the whole range, as pyqtgraph pads
                size = (hi - lo) / pixels
                lo = min([lo] + [r[0] - pad * size for r, pad in ranges if pad])
                hi = max([hi] + [r[1] + pad * size for r, pad in ranges if pad])
            out[axis] = [lo, hi]
        return out

    def _child_bounds(self, item) -> tuple[Span, Span] | None:
        """(x span, y span) of one shown child in view coordinates; None if it adds nothing."""
        if getattr(item, "dataBounds", None) is None:
            if item.flags() & item.GraphicsItemFlag.ItemHasNoContents:
                return None
            rect = self.mapFromItemToView(item, item.boundingRect()).boundingRect()
            return (rect.left(), rect.right()), (rect.top(), rect.bottom())
        plain = item.parentItem() is self.childGroup and item.transform().isIdentity() and item.pos().isNull()
        if not plain and (item.transform().isRotating() or item.parentItem() is not self.childGroup):
            # turned, or not a direct child (none in BatchLab): pyqtgraph's answer for it alone
            x, y = super().childrenBounds(items=[item])
            return (None if x is None else tuple(x)), (None if y is None else tuple(y))
        spans: list[Span] = []
        for axis in (0, 1):
            span = item.dataBounds(axis, frac=1.0)
            ok = span is not None and None not in span[:2] and all(math.isfinite(v) for v in span[:2])
            spans.append((float(span[0]), float(span[1])) if ok else None)
        if spans == [None, None]:
            return None
        if not plain:  # a moved child (a running epoch's marker): its data bounds where the view shows them
            (x0, x1), (y0, y1) = (span or (0.0, 0.0) for span in spans)
            rect = self.mapFromItemToView(item, QRectF(x0, y0, x1 - x0, y1 - y0)).boundingRect()
            spans = [
                None if spans[0] is None else (rect.left(), rect.right()),
                None if spans[1] is None else (rect.top(), rect.bottom()),
            ]
        return spans[0], spans[1]

    def queueUpdateAutoRange(self) -> None:  # noqa: N802 (pyqtgraph override)
        """A child's bounds changed. pyqtgraph marks the auto-range due and repaints the whole view, so
        that the paint settles it; while a run trains that made every frame repaint every item of the
        view (grid, all curves) even when one running-epoch marker moved. Here, while sticky, only the mark
        is set: the live plots settle the range right after their update (LivePlots.update_plot), and
        any paint (the changed item repaints its own bounds) settles it too (ViewBox.prepareForPaint)."""
        if self.sticky:
            self._autoRangeNeedsUpdate = True
            return
        super().queueUpdateAutoRange()

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
