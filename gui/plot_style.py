"""Shared look of every plot: one colour per batch size, dimming for unselected runs, a log2 axis."""

from __future__ import annotations

import functools
import math

import pyqtgraph as pg
from batchlab.gui.theme import contrast_ratio, relative_luminance
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor
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
        return QColor(_legible_line(PLOT_COLOURS["foreground"] if name == _INK else name, PLOT_COLOURS["background"]))


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


@functools.lru_cache(maxsize=256)
def _legible_line(name: str, background: str) -> QColor:
    """legible(name) against `background`, once per colour and theme: a summary of 500 runs asked it 4,000 times
    (0.2 s of luminance arithmetic). Callers get a copy (BatchColours.colour)."""
    return legible(QColor(name))


def text_colour(colour: QColor) -> QColor:
    """A run's colour for text on the plot (a label beside its mark): the same hue at 4.5:1 contrast."""
    return legible(colour, TEXT_CONTRAST)


_PENS: dict[tuple, pg.QtGui.QPen] = {}
_BRUSHES: dict[tuple, pg.QtGui.QBrush] = {}


def run_pen(
    colour: QColor, *, compare: bool, dimmed: bool, highlighted: bool, style=None, thin: bool = False
) -> pg.QtGui.QPen:
    """The pen of a run's curve: dashed for the comparison sweep, faint when other runs are selected.

    thin=True is for curves with many points (loss per step): Qt rasterises 1-pixel lines on a
    fast path, while a 1.6-pixel pen made each repaint of a step plot 4 ms slower on the dev VM.
    One shared pen per look (never change it): a scatter plot draws each pen object's symbol once (its
    atlas is keyed by the pen's identity), so 500 runs' points in a few looks cost a few symbols, not 500.
    """
    key = (colour.rgba(), compare, dimmed, highlighted, style, thin)
    pen = _PENS.get(key)
    if pen is None:
        pen = _PENS[key] = _make_pen(
            colour, compare=compare, dimmed=dimmed, highlighted=highlighted, style=style, thin=thin
        )
    return pen


def _make_pen(colour: QColor, *, compare: bool, dimmed: bool, highlighted: bool, style, thin: bool) -> pg.QtGui.QPen:
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
    """A run's fill, one shared brush per look (see run_pen)."""
    key = (colour.rgba(), dimmed)
    brush = _BRUSHES.get(key)
    if brush is None:
        brush = _BRUSHES[key] = _make_brush(colour, dimmed=dimmed)
    return brush


def _make_brush(colour: QColor, *, dimmed: bool) -> pg.QtGui.QBrush:
    c = QColor(colour)
    if dimmed:
        c.setAlpha(DIM_ALPHA)
    return pg.mkBrush(c)


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
