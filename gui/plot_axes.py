"""The plots' axes (tick labels that fit, log2 batch axes, whole-number epochs), the grid drawn at the ticks,
and `make_plot`, which every view's plots come from (colours, legends and layout: gui/plot_style.py)."""

from __future__ import annotations

import math

import pyqtgraph as pg
from batchlab.gui.plot_style import (
    GRID_ALPHA,
    LEFT_AXIS_PX,
    PLOT_COLOURS,
    PLOT_MIN_PX,
    add_legend_below,
    let_title_shrink,
)
from PySide6.QtCore import QEvent, QLineF, QRectF
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPen, QPicture
from PySide6.QtWidgets import QApplication


class Axis(pg.AxisItem):
    """pyqtgraph's axis, but its label is re-rendered only when its text changes, and a repaint of the
    view beside it does not redraw its tick labels.

    An axis with units re-renders its label (HTML layout and a size check) on every change of the
    view range, to pick an SI prefix that rarely changes; on a live plot that is every frame.
    Qt repaints a changed view with a margin of a few pixels that takes in the axis line next to it:
    pyqtgraph then replays the whole axis, tick text included, on every plot update. Here a repaint
    that exposes none of the tick text replays only the line and tick marks.
    """

    _label_html: str | None = None
    _text_rect: QRectF | None = None  # where the cached picture draws tick text (item coordinates)
    _lines_picture: QPicture | None = None  # the cached picture without its text

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.setFlag(self.GraphicsItemFlag.ItemUsesExtendedStyleOption)  # paint gets the exposed rect

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):  # noqa: N802,N803 (pyqtgraph override)
        super().drawPicture(p, axisSpec, tickSpecs, textSpecs)
        text = QRectF()
        for rect, _flags, _text in textSpecs:
            text = text.united(QRectF(rect))
        self._text_rect = text
        self._lines_picture = QPicture()
        painter = QPainter(self._lines_picture)
        try:
            super().drawPicture(painter, axisSpec, tickSpecs, [])
        finally:
            painter.end()

    def paint(self, p, opt, widget) -> None:
        text, exposed = self._text_rect, opt.exposedRect
        # an export paints without a widget or an exposed rect: the whole axis then
        if widget is not None and not exposed.isEmpty() and self.picture is not None and text is not None:
            if self._lines_picture is not None and not exposed.intersects(text):
                self._lines_picture.play(p)
                return
        super().paint(p, opt, widget)

    def _updateLabel(self) -> None:  # noqa: N802 (pyqtgraph override)
        html = self.labelString()
        if html == self._label_html:  # same text: the tick labels may still be rescaled
            self.picture = None
            self.update()
            return
        self._label_html = html
        super()._updateLabel()
        self._fit_label()

    def resizeEvent(self, ev=None) -> None:  # noqa: N802 (Qt override)
        self._fit_label()
        super().resizeEvent(ev)  # places the label, centred on what is shown

    def _fit_label(self) -> None:
        """A label longer than its axis ("process RSS peak (MiB" on a short plot) is shortened to fit: its
        units alone, else its words elided; the whole label is the tooltip. Exports draw what is shown."""
        label = self.label
        if label is None or not (self.labelText or self.labelUnits):
            return
        whole = self.labelString()
        label.setHtml(whole)
        room = self.size().height() if self.orientation in ("left", "right") else self.size().width()
        if room <= 0 or label.boundingRect().width() <= room:
            label.setToolTip("")
            return
        text, units = self.labelText, whole[whole.index(">") + 1 : whole.rindex("<")][len(self.labelText) :].strip()
        style = whole[: whole.index(">") + 1]
        shown = [units] if units else []
        shown += [text[:n].rstrip() + "\u2026" for n in range(len(text) - 1, 0, -1)]
        for candidate in shown:
            label.setHtml(f"{style}{candidate}</span>")
            if label.boundingRect().width() <= room:
                break
        label.setToolTip(f"{text} {units}".strip())


class Log2Axis(Axis):
    """An x axis whose values are log2(batch size), labelled with the batch sizes themselves.

    Every power of two in the range gets a tick; where the labels would touch ("64128256512" on a narrow
    plot), only every second (fourth, ...) one is labelled, counted from the smallest, the others are
    unlabelled minor ticks.
    """

    _thinned = False  # the last tickValues labelled only every n-th power of two

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph override)
        # Only powers of two inside the range: a tick outside it drew its grid line outside the plot in an
        # SVG export (Qt's SVG generator drops the view's clipping), a stray line left of the y axis.
        lo, hi = math.ceil(minVal - 1e-9), math.floor(maxVal + 1e-9)
        if hi - lo > 40 or hi < lo:
            return super().tickValues(minVal, maxVal, size)
        values = [float(v) for v in range(lo, hi + 1)]
        self._thinned = False
        if self.orientation not in ("bottom", "top") or size <= 0 or maxVal <= minVal:
            return [(1.0, values)]
        font = self.style.get("tickFont") or self.font()
        metrics = QFontMetrics(font)
        widest = max(metrics.horizontalAdvance(f"{2.0**v:g}") for v in values) + metrics.averageCharWidth() * 2
        pixels_per_value = size / (maxVal - minVal)
        step = 1
        while step * pixels_per_value < widest and step < len(values):
            step *= 2
        if step == 1:
            return [(1.0, values)]
        # Labelled from the smallest power in range on (8, 32, 128, 512 rather than 16, 64, 256): a sweep's
        # batch sizes usually start there, so the labels fall on its points and bars, not between them.
        labelled = values[::step]
        self._thinned = True
        return [(float(step), labelled), (1.0, [v for v in values if v not in labelled])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph override)
        if spacing == 1.0 and self._thinned:  # the unlabelled level beside a labelled every-n-th one
            return ["" for _ in values]
        return [f"{2.0**v:g}" if abs(v) < 40 else "" for v in values]


class IntegerAxis(Axis):
    """An x axis for counts (epochs): ticks only at whole numbers."""

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph override)
        levels = []
        for spacing, values in super().tickValues(minVal, maxVal, size):
            whole = [v for v in values if float(v).is_integer()]
            if spacing >= 1 and whole:
                levels.append((spacing, whole))
        if not levels and math.isfinite(minVal) and math.isfinite(maxVal):
            levels = [(1.0, [float(v) for v in range(math.ceil(minVal), math.floor(maxVal) + 1)])]
        return levels


class TickGrid(pg.GraphicsObject):
    """Grid lines at the axes' tick values, drawn straight onto the view.

    Looks like pyqtgraph's `showGrid`, which replays each axis's cached QPicture across the whole
    view: that costs about 8 ms of a 12 ms plot repaint on a 2-core machine, against about 1.5 ms here,
    and every repaint during a sweep is time the GUI thread cannot answer the user.
    """

    def __init__(self, plot_item: pg.PlotItem, alpha: int = GRID_ALPHA):
        super().__init__()
        self.plot_item = plot_item
        self.alpha = alpha
        self._ticks: dict[str, tuple] = {}  # axis name -> ((min, max, pixels), tick levels) of the last paint
        self.antialias = False
        self.setZValue(-1000)  # behind every curve

    def boundingRect(self) -> QRectF:  # noqa: N802 (Qt override)
        view = self.getViewBox()
        return view.viewRect() if view is not None else QRectF()

    def viewRangeChanged(self) -> None:  # noqa: N802 (pyqtgraph hook)
        self.prepareGeometryChange()
        self.update()

    def viewTransformChanged(self) -> None:  # noqa: N802 (pyqtgraph hook): a resize changes the ticks
        self.update()

    def lines(self) -> dict[int, list[QLineF]]:
        """Grid lines by alpha: level 0 (major ticks) strongest, as AxisItem fades its own grid."""
        view = self.getViewBox()
        rect, size = view.viewRect(), view.size()
        out: dict[int, list[QLineF]] = {}
        for name, lo, hi, pixels in (
            ("bottom", rect.left(), rect.right(), size.width()),
            ("left", rect.top(), rect.bottom(), size.height()),
        ):
            if pixels <= 0 or not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
                continue
            key = (lo, hi, pixels)
            if self._ticks.get(name, (None,))[0] != key:  # tick values cost ~0.3 ms; repaints often keep the range
                self._ticks[name] = (key, self.plot_item.getAxis(name).tickValues(lo, hi, pixels))
            for level, (_spacing, values) in enumerate(self._ticks[name][1]):
                room = min(1.0, max(0.0, 0.05 * pixels / (len(values) + 1)))
                alpha = int(self.alpha / (level + 1) * room)
                if alpha <= 0:
                    continue
                for v in values:
                    if name == "bottom":
                        out.setdefault(alpha, []).append(QLineF(v, rect.top(), v, rect.bottom()))
                    else:
                        out.setdefault(alpha, []).append(QLineF(rect.left(), v, rect.right(), v))
        return out

    def paint(self, painter, *_args) -> None:
        if self.getViewBox() is None:
            return
        # Horizontal and vertical hairlines: without antialiasing they land on whole pixels (as crisp), at a
        # fraction of the cost of the antialiased ones the window's render hint would draw.
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, self.antialias)
        for alpha, lines in self.lines().items():
            colour = QColor(PLOT_COLOURS["foreground"])
            colour.setAlpha(alpha)
            pen = QPen(colour)
            pen.setCosmetic(True)
            painter.setPen(pen)
            painter.drawLines(lines)


def make_plot(
    title: str,
    x_label: str,
    x_units: str | None,
    y_label: str,
    y_units: str | None,
    *,
    log2_x: bool = False,
    many_points: bool = False,
    view_box: pg.ViewBox | None = None,
):
    """A PlotWidget with labelled axes (units shown), a grid and a legend.

    many_points: its curves can hold millions of points (one per step), so they are clipped to the
    view and downsampled to peaks. Plots of a point per epoch or per run go without: both make
    every change of the view range recompute each curve's displayed data (2-3 ms a repaint).
    view_box: the plot's ViewBox (the live plots pass a gui.sticky_view.StickyViewBox); default pyqtgraph's.
    """
    bottom = Log2Axis if log2_x else IntegerAxis if x_label == "epoch" else Axis
    axis_items = {"bottom": bottom(orientation="bottom"), "left": Axis(orientation="left")}
    widget = pg.PlotWidget(title=title, axisItems=axis_items, viewBox=view_box)
    item = widget.getPlotItem()
    let_title_shrink(item.titleLabel)
    item.setLabel("bottom", x_label, units=x_units)
    item.setLabel("left", y_label, units=y_units)
    grid = TickGrid(item)
    grid.setCacheMode(grid.CacheMode.DeviceCoordinateCache)
    item.addItem(grid, ignoreBounds=True)
    # pyqtgraph exempts a view's child group from reporting its transform as a change of the items' bounds,
    # but under a misspelt flag (ChildGroup sets `__inform_view_on_change`, GraphicsObject reads `..._changes`):
    # every range change then queued a second auto-range from inside the paint, and a second repaint.
    item.getViewBox().childGroup._GraphicsObject__inform_view_on_changes = False
    for name in ("top", "right"):  # hidden, but linked to the view they re-render their labels at every range change
        item.getAxis(name).unlinkFromView()
    # A fixed axis width: otherwise new tick labels ("100" -> "1000") re-lay out the plot and repaint it twice.
    item.getAxis("left").setWidth(LEFT_AXIS_PX)
    if many_points:
        item.setClipToView(True)
        item.setDownsampling(auto=True, mode="peak")
    for name in ("bottom", "left"):
        # Two tick levels, not pyqtgraph's three: the third ("pretty, but eat up CPU", says pyqtgraph)
        # made each axis regeneration, which every range change of a live plot costs, ~30% slower.
        item.getAxis(name).setStyle(maxTickLevel=1)
    add_legend_below(item)
    if y_units == "MiB":
        item.getAxis("left").enableAutoSIPrefix(False)
    widget.setMinimumSize(PLOT_MIN_PX[0], PLOT_MIN_PX[1])
    hold_scene_active(widget)
    return widget


def hold_scene_active(widget: pg.PlotWidget) -> None:
    """Keep the plot's scene active for good, so that showing its tab again paints it once, not three times.

    A QGraphicsView sends its scene WindowActivate when it is shown and WindowDeactivate when hidden; the
    scene passes the first activation (and the last deactivation) to its items, and every QGraphicsWidget
    (the plot, its axes, view box and legend) calls update() on it. Those updates come back from the scene a
    turn of the event loop after the view's first paint, one scene per turn, and repaint each plot twice more:
    returning to the Live tab of a 504-run file painted each of its six plots three times. One activation of
    our own, never taken back, keeps the scene's count above zero: the items' looks do not depend on it.
    """
    QApplication.sendEvent(widget.scene(), QEvent(QEvent.Type.WindowActivate))
