"""Shared look of every plot: one colour per batch size, dimming for unselected runs, a log2 axis."""

from __future__ import annotations

import math

import pyqtgraph as pg
from batchlab.gui.theme import contrast_ratio, relative_luminance
from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPen, QPicture
from PySide6.QtWidgets import QGridLayout, QWidget

# Colour-blind-friendly qualitative palette: Okabe-Ito, then Tableau for more batch sizes, every
# colour with at least 3:1 contrast against the light plots' white (WCAG's minimum for graphics).
# Okabe-Ito's orange (#E69F00, 2.25:1) and sky blue (#56B4E9, 2.31:1) and Tableau's olive
# (#BCBD22, 2.01:1) and cyan (#17BECF, 2.26:1) are darkened in HSL lightness, hue and saturation
# kept, to just over 3:1, so the hues colour-blind viewers tell apart stay. On the dark plots
# `legible` lightens the few under 3:1 there. tests/gui/test_palette.py computes every ratio.
PALETTE = (
    "#0072B2",  # blue
    "#C28600",  # orange (Okabe-Ito #E69F00, darkened)
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#1D99E0",  # sky blue (Okabe-Ito #56B4E9, darkened)
    "#8C564B",  # brown
    "#000000",  # black: drawn in the plots' foreground colour
    "#7F7F7F",  # grey
    "#95961B",  # olive (Tableau #BCBD22, darkened)
    "#13A1AF",  # cyan (Tableau #17BECF, darkened)
    "#9467BD",  # purple
)
DIM_ALPHA = 45
COMPARE_STYLE = Qt.PenStyle.DashLine
MIB = float(1 << 20)
LEFT_AXIS_PX = 62
PLOT_MIN_PX = (150, 120)  # small enough for three plots side by side at 1024 px or at 150% scaling
GRID_ALPHA = 51  # of 255, for the major tick lines; minor ones are fainter

# How a run that did not finish normally is drawn in the summary: symbol and short label.
STATUS_MARKS = {
    "oom": ("x", "OOM"),
    "diverged": ("t", "diverged"),
    "crashed": ("star", "crashed"),
    "error": ("d", "error"),
    "interrupted": ("s", "stopped"),
    "aborted": ("s", "aborted"),
}

SOURCE_LABELS = {"main": "", "compare": " (compare)"}

# The plots' colours, set by the window's theme (gui/theme.py): background, foreground (axes, text,
# legend text) and neutral (grey marks in no batch size's colour). Light until a theme says otherwise.
PLOT_COLOURS = {"background": "#FFFFFF", "foreground": "#000000", "neutral": "#555555"}
_INK = "#000000"  # the palette's black: drawn in the foreground colour, so it stays visible on dark plots


def set_plot_colours(background: str, foreground: str, neutral: str) -> None:
    """Colours for plots made from now on (apply_plot_colours restyles the existing ones)."""
    PLOT_COLOURS.update(background=background, foreground=foreground, neutral=neutral)
    pg.setConfigOptions(background=background, foreground=foreground)


def configure_pyqtgraph() -> None:
    """The theme's background and foreground, antialiasing; called once before any plot is made."""
    pg.setConfigOptions(background=PLOT_COLOURS["background"], foreground=PLOT_COLOURS["foreground"], antialias=True)


def legend_brush() -> pg.QtGui.QBrush:
    """The legend box: the plot background, slightly see-through."""
    c = QColor(PLOT_COLOURS["background"])
    c.setAlpha(190)
    return pg.mkBrush(c)


def apply_plot_colours(widget: pg.PlotWidget) -> None:
    """Give an existing plot the current colours: background, axes, tick labels, title, legend text, grid."""
    fg = PLOT_COLOURS["foreground"]
    widget.setBackground(PLOT_COLOURS["background"])
    item = widget.getPlotItem()
    for name in ("bottom", "left"):
        axis = item.getAxis(name)
        axis.setPen(fg)
        axis.setTextPen(fg)
    if item.titleLabel.text:
        item.titleLabel.setText(item.titleLabel.text, color=fg)
    legend = item.legend
    if legend is not None:
        legend.setBrush(legend_brush())
        legend.setLabelTextColor(fg)  # entries added from now on
        for _sample, label in legend.items:  # setLabelTextColor does not redraw the existing ones
            label.setText(label.text, color=fg)
    item.update()


class BatchColours:
    """Maps batch sizes to palette colours, by rank among all batch sizes on screen."""

    def __init__(self) -> None:
        self._order: list[int] = []

    def update(self, batch_sizes: list[int]) -> bool:
        """Set the batch sizes on screen; True when the mapping changed (curves must be recoloured)."""
        order = sorted(set(batch_sizes))
        changed = order != self._order
        self._order = order
        return changed

    def colour(self, batch_size: int) -> QColor:
        if batch_size in self._order:
            name = PALETTE[self._order.index(batch_size) % len(PALETTE)]
        else:
            name = PALETTE[int(math.log2(max(batch_size, 1))) % len(PALETTE)]
        return legible(QColor(PLOT_COLOURS["foreground"] if name == _INK else name))


LINE_CONTRAST = 3.0  # WCAG's minimum for graphics against their background
TEXT_CONTRAST = 4.5  # WCAG AA for text


def legible(colour: QColor, minimum: float = LINE_CONTRAST) -> QColor:
    """A colour with at least `minimum` contrast against the plot background: lightened on a dark one
    (#8C564B is 2.75:1 there), darkened on a light one; unchanged where it has it (every palette line
    colour on the light plots)."""
    background = QColor(PLOT_COLOURS["background"])
    dark = relative_luminance(background) <= 0.18
    c = QColor(colour)
    for _ in range(40):
        if contrast_ratio(c, background) >= minimum:
            break
        hue, saturation, lightness, alpha = c.getHslF()
        lightness = min(1.0, lightness + 0.03) if dark else max(0.0, lightness - 0.03)
        c = QColor.fromHslF(max(hue, 0.0), saturation, lightness, alpha)
    return c


def text_colour(colour: QColor) -> QColor:
    """A run's colour for text on the plot (a label beside its mark): the same hue at 4.5:1 contrast."""
    return legible(colour, TEXT_CONTRAST)


def run_pen(
    colour: QColor, *, compare: bool, dimmed: bool, highlighted: bool, style=None, thin: bool = False
) -> pg.QtGui.QPen:
    """The pen of a run's curve: dashed for the comparison sweep, faint when other runs are selected.

    thin=True is for curves with many points (loss per step): Qt rasterises 1-pixel lines on a
    fast path, while a 1.6-pixel pen made each repaint of a step plot 4 ms slower on the dev VM.
    """
    c = QColor(colour)
    if dimmed:
        c.setAlpha(DIM_ALPHA)
    if thin:
        width = 2.0 if highlighted else 1.0
    else:
        width = 3.0 if highlighted else 1.6
    pen = pg.mkPen(c, width=width)
    if style is not None:
        pen.setStyle(style)
    elif compare:
        pen.setStyle(COMPARE_STYLE)
    return pen


def run_brush(colour: QColor, *, dimmed: bool) -> pg.QtGui.QBrush:
    c = QColor(colour)
    if dimmed:
        c.setAlpha(DIM_ALPHA)
    return pg.mkBrush(c)


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
    return widget


LEGEND_ROW = 4  # PlotItem's layout: title 0, top axis 1, view 2, bottom axis 3; the legend goes under it
LEGEND_COLUMNS = 3  # entries a row at most
LEGEND_MAX_SHARE = 0.4  # of the plot's height; a legend needing more is hidden


def add_legend_below(item: pg.PlotItem) -> pg.LegendItem:
    """A legend in the plot's layout below the x axis: outside the data area, so it never hides a point.

    It is `item.legend`, so curves added with a name appear in it; `sync_legend` hides it while empty.
    """
    legend = BelowLegend(item, labelTextSize="8pt", verSpacing=-6, colCount=LEGEND_COLUMNS)
    legend.setParentItem(item)
    item.layout.addItem(legend, LEGEND_ROW, 0, 1, 3)  # the plot's whole width, under the left axis too
    item.legend = legend
    item.getViewBox().sigResized.connect(lambda _view: sync_legend(item, relayout=False))
    sync_legend(item)
    return legend


class BelowLegend(pg.LegendItem):
    """A legend that re-fits itself under its plot whenever an entry comes or goes (whoever adds it)."""

    def __init__(self, plot_item: pg.PlotItem, **kwargs):
        super().__init__(**kwargs)
        self._plot_item = plot_item

    def addItem(self, item, name) -> None:  # noqa: N802 (pyqtgraph override)
        super().addItem(item, name)
        if self._plot_item.legend is self:
            sync_legend(self._plot_item)

    def removeItem(self, item) -> None:  # noqa: N802 (pyqtgraph override)
        super().removeItem(item)
        if self._plot_item.legend is self:
            sync_legend(self._plot_item)


def remove_items(plot: pg.PlotItem, items: list) -> None:
    """Take these items out of a plot and its legend, and empty the list."""
    for item in items:
        plot.removeItem(item)
        if plot.legend is not None:
            plot.legend.removeItem(item)
    items.clear()


def sync_legend(item: pg.PlotItem, relayout: bool = True) -> None:
    """Show the legend only when it has entries (an empty box explains nothing), as many a row as fit.

    relayout=False (a resize): the plot's layout is only asked again if the entries a row changed.
    """
    legend = item.legend
    if legend is None:
        return
    entries = len(legend.items)
    # Never wider than the plot: entries that do not fit a row go to the next (a legend's minimum
    # width would otherwise widen the plot past its cell and push the grid off the window).
    legend.setMinimumWidth(0)
    room = item.width()
    columns = max(1, min(LEGEND_COLUMNS, entries))
    if room > 0 and entries:
        # the width of a column as the legend's own layout measures it now, and how many fit
        per_column = legend.layout.effectiveSizeHint(Qt.SizeHint.PreferredSize).width() / legend.columnCount
        columns = max(1, min(columns, int(room // max(per_column, 1.0))))
    if legend.columnCount != columns:
        legend.setColumnCount(columns)
        relayout = True
    height = legend.layout.sizeHint(Qt.SizeHint.PreferredSize).height() if entries else 0.0
    # A legend taller than a share of a small plot (7 batch sizes at 1024x700) would squeeze the
    # data to a sliver: it goes (the runs table shows each batch size's colour) until there is room.
    fits = item.height() <= 0 or height <= LEGEND_MAX_SHARE * item.height()
    shown = entries > 0 and fits  # an empty legend explains nothing
    if getattr(legend, "shown", None) != shown:
        legend.shown = shown
        legend.setVisible(shown)
        relayout = True
    if not relayout:
        return
    if not fits:
        height = 0.0
    legend.setMaximumHeight(height)
    legend.setMinimumHeight(height)
    # LegendItem.addItem moves the legend to its parent's corner (updateSize's setGeometry); the
    # plot's layout puts it back under the axis only once it is invalidated.
    item.layout.invalidate()


class ZeroAnchor(pg.GraphicsObject):
    """An invisible item whose y data bounds are 0: an auto-ranged axis of amounts (memory, time) starts at zero."""

    bounds_follow_others = True  # its bounds change with the other items' (gui.sticky_view keeps none for it)

    def boundingRect(self) -> QRectF:  # noqa: N802 (Qt override)
        return QRectF()

    def paint(self, *_args) -> None:
        pass

    def dataBounds(self, axis: int, frac: float = 1.0, orthoRange=None):  # noqa: N802 (pyqtgraph hook)
        """y bounds (0, 0) once the plot shows data; before that nothing (an empty plot keeps its default range)."""
        view = self.getViewBox()
        if axis != 1 or view is None:
            return None
        for item in view.addedItems:
            if item is self or not item.isVisible() or not hasattr(item, "dataBounds"):
                continue
            bounds = item.dataBounds(1)
            if bounds is not None and all(b is not None and math.isfinite(b) for b in bounds):
                return (0.0, 0.0)
        return None


def let_title_shrink(label: pg.LabelItem) -> None:
    """A title never makes its plot wider than the view, and one too long for its plot is elided.

    LabelItem's minimum width is its text's, which widened the plot's layout past a narrow view and
    cut off the right of the data (1024 px window); with that gone the title itself was cut
    ("Loss vs wall-clock ti"). Now it shows "Loss vs wall-cl…" with the whole title as tooltip;
    `label.text` stays the whole title (exports and theme switches use it).
    """
    update_min = label.updateMin
    set_html = label.item.setHtml
    whole = {"html": ""}

    def shrinkable() -> None:
        update_min()
        label.setMinimumWidth(0)

    def fit() -> None:
        """Show as much of the title as fits the label's width, the rest elided."""
        text, html = label.text or "", whole["html"]
        set_html(html)
        room = label.rect().width()
        document = label.item.document()
        shown = text
        if room > 0 and text and document.idealWidth() > room:
            marker = f">{text}<"
            for n in range(len(text) - 1, 0, -1):
                shown = text[:n].rstrip() + "\u2026"
                set_html(html.replace(marker, f">{shown}<"))
                if document.idealWidth() <= room:
                    break
        label.setToolTip(text if shown != text else "")

    def html_set(html: str) -> None:
        whole["html"] = html
        fit()

    def refit() -> None:
        fit()
        label.item.setPos(0, 0)
        bounds = label.itemRect()
        bounds.moveCenter(label.rect().center())
        label.item.setPos(bounds.topLeft() - label.itemRect().topLeft())

    label.updateMin = shrinkable
    label.item.setHtml = html_set
    label.geometryChanged.connect(refit)
    label.setText(label.text)
    shrinkable()


def lay_out_grid(parent: QWidget, widgets: dict[str, pg.PlotWidget], columns: int) -> None:
    """Put the plots in a tight grid on `parent`, row by row, in the dict's order."""
    layout = QGridLayout(parent)
    layout.setContentsMargins(2, 2, 2, 2)
    layout.setSpacing(4)
    for i, widget in enumerate(widgets.values()):
        layout.addWidget(widget, i // columns, i % columns)
