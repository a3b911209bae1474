"""The live plots' curve items: made once per run and series, styled by batch size, selection and sweep,
named in the legends (one entry per batch size), grouped once their runs ended long ago, and removed.
A mixin of gui/live_plots.py's LivePlots."""

from __future__ import annotations

import pyqtgraph as pg
from batchlab.gui import memory_plot
from batchlab.gui.finished_curves import GroupKey
from batchlab.gui.live_series import (
    BATCH_LEGEND,
    EVAL_PLOTS,
    SERIES,
    STYLE_LEGEND,
    RunKey,
)
from batchlab.gui.plot_style import (
    PLOT_COLOURS,
    SOURCE_LABELS,
    run_brush,
    run_pen,
)
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor


class LiveCurves:
    """Curve items, their styles and the legends of LivePlots."""

    def _curve(self, source, run, series, plot_id, symbol, style) -> pg.PlotDataItem:
        key = (source, run.index, series)
        curve = self._curves.get(key)
        if curve is None:
            if plot_id in BATCH_LEGEND:
                self._add_batch_legend(plot_id, source, run.batch_size)
            # Step curves (no symbols) are drawn without antialiasing, which costs several times
            # more, and with a thin pen (see run_pen).
            many_points = symbol is None
            curve = pg.PlotDataItem(
                symbol=symbol,
                symbolSize=6,
                antialias=not many_points,
                dynamicRangeLimit=1e6 if many_points else None,
            )
            curve.run_key = (source, run.index)
            curve.pen_style = style
            curve.thin = many_points
            self.plots[plot_id].getPlotItem().addItem(curve)
            self._curves[key] = curve
            self._add_style_legend(series)
            self._style_curve(curve, run.batch_size)
            for part in (curve.curve, curve.scatter):
                part.setCacheMode(part.CacheMode.DeviceCoordinateCache)
        return curve

    def _add_batch_legend(self, plot_id: str, source: str, batch_size: int) -> None:
        """One legend entry per batch size and sweep (not per run), with a sample of its own: the runs' curves
        may go into their group's (gui/finished_curves.py) while the entry stays."""
        key = (plot_id, source, batch_size)
        if key in self._batch_legend:
            return
        sample = self._batch_legend[key] = pg.PlotDataItem()
        sample.run_key, sample.pen_style, sample.thin = None, None, False
        self._style_curve(sample, batch_size, compare=source == "compare")
        self.plots[plot_id].getPlotItem().legend.addItem(sample, f"batch {batch_size}{SOURCE_LABELS[source]}")

    def _drop_curve(self, key: tuple[str, int, str]) -> None:
        """Take a run's own curve out of its plot (its points are in its group now, or its sweep went)."""
        curve = self._curves.pop(key, None)
        if curve is not None:
            self._remove_item(curve)

    def _remove_item(self, curve: pg.PlotDataItem) -> None:
        view = curve.getViewBox()
        for widget in self.plots.values():
            if widget.getPlotItem().getViewBox() is view:
                widget.getPlotItem().removeItem(curve)

    def _group_item(self, group: GroupKey) -> pg.PlotDataItem:
        """The one curve of a group of ended runs: styled as its batch size, dimmed while runs are selected."""
        source, series, batch_size = group
        plot_id, _x, _y, _table, symbol, style = SERIES[series]
        many_points = symbol is None
        curve = pg.PlotDataItem(symbol=symbol, symbolSize=6, antialias=not many_points)
        # A 1-pixel (cosmetic) pen: Qt strokes it, dashed or dotted too, on its fast path. A group holds every
        # old run of its batch size (84 epoch lines across the plot at 500 runs): at 1.6 px its dots and dashes
        # went through Qt's general stroker, 20-30 ms a group and 0.54 s for one loss-per-epoch plot's paint.
        curve.run_key, curve.pen_style, curve.thin = (source, -1), style, True
        item = self.plots[plot_id].getPlotItem()
        item.addItem(curve)
        # runs one after another: x goes back at each, which clipping and auto-downsampling take for one run
        curve.setClipToView(False)
        curve.setDownsampling(ds=1, auto=False)
        self._style_curve(curve, batch_size)
        return curve

    def _label_memory(self) -> bool:
        """On a CPU (host RSS the only reading) the axis says what it is: the whole training process's RSS.

        Where each run's RSS before training is drawn, the axis spans from that baseline (the part
        that depends on the batch size shows); otherwise it starts at zero. True if the label or anchor changed.
        """
        columns = {SERIES[s][2] for (_src, _i, s) in self._curves if SERIES[s][0] == "memory"}
        columns |= {SERIES[s][2] for s in self.finished.series() if SERIES[s][0] == "memory"}
        columns |= self._expected_memory  # a live CPU sweep's, labelled before its first epoch ends
        label, from_zero = memory_plot.axis_label(columns)
        changed = label != self._memory_label or from_zero != self._memory_zero.isVisible()
        if label != self._memory_label:
            self._memory_label = label
            self.plots["memory"].getPlotItem().setLabel("left", label, units="MiB")
        self._memory_zero.setVisible(from_zero)
        return changed

    def _add_style_legend(self, series: str) -> None:
        if series not in STYLE_LEGEND or series in self._style_named:
            return
        plot_id, _x, _y, _t, symbol, _style = SERIES[series]
        sample = pg.PlotDataItem([0], [0], symbol=symbol)
        self._style_named[series] = sample
        self._style_sample(series)
        self.plots[plot_id].getPlotItem().legend.addItem(sample, STYLE_LEGEND[series])

    def _style_sample(self, series: str) -> None:
        """Draw a style legend sample in the theme's neutral colour (again after a theme switch)."""
        grey = QColor(PLOT_COLOURS["neutral"])
        pen = pg.mkPen(grey, width=1.6, style=SERIES[series][5] or Qt.PenStyle.SolidLine)
        sample = self._style_named[series]
        sample.setPen(pen)
        sample.setSymbolPen(pen)
        sample.setSymbolBrush(grey)

    def set_selection(self, keys: set[RunKey]) -> None:
        """Highlight these runs everywhere and dim the rest (empty set: all normal).

        The same selection again changes nothing (the runs table repeats it after each reset of its model,
        e.g. when a sweep starts: restyling then was a third of that step's ~35 ms)."""
        if set(keys) == self.selection:
            return
        self._forget_drawn(self.selection ^ set(keys))  # a selected run of long ago gets its own curve back
        self.selection = set(keys)
        self.restyle()

    def restyle(self) -> None:
        """New looks (a selection, colours): the legends now; each plot's curves and marks when it is next drawn
        (`_restyle_plot` from update_plot: a plot per refresher tick, each repainting only its own curves, whose
        cached pictures all go; all six at once took ~0.3 s of one paint at 500 runs)."""
        for (_plot, source, batch_size), sample in self._batch_legend.items():
            self._style_curve(sample, batch_size, compare=source == "compare")
        for series in self._style_named:
            self._style_sample(series)
        self.bars.restyle_legend()
        self.evals.restyle_legend()
        self.batch_marks.restyle_legend()
        if self._curves or self.finished.items or self.running.markers:  # (nothing drawn: nothing to restyle)
            self.restyle_due = set(self.plot_ids)
        # the runs with evaluation or batch-change marks draw them again (restyled as drawn); the other runs have none
        marked = {k[:2] for k in (*self.evals.curves, *self.evals.lines, *self.batch_marks.items)}
        self._drawn = {k: v for k, v in self._drawn.items() if k[2] not in EVAL_PLOTS or k[:2] not in marked}
        self._bars_drawn.clear()
        self.bars.forget()
        if self.live():
            # While data arrives the Refresher's next frame redraws the marks and bars, one plot per tick
            # (all at once, when a sweep starts and its batch sizes recolour everything, was a 50 ms stall).
            return
        self.take_snapshot()
        if self.restyle_due and self.draw_in_slices is not None and self.isVisible() and self.draw_in_slices():
            return  # the window's refresher draws it, a plot per tick
        self.pacer.draw(self.plot_ids, self.update_plot)

    def _restyle_plot(self, plot_id: str) -> bool:
        """Give one plot's curves, groups and running-epoch markers the current looks; True if it was due. A curve
        whose looks stay is not touched (_style_curve)."""
        if plot_id not in self.restyle_due:
            return False
        self.restyle_due.discard(plot_id)
        for (source, index, series), curve in self._curves.items():
            run = self.sources.get(source).runs.get(index) if source in self.sources else None
            if run is not None and SERIES[series][0] == plot_id:
                self._style_curve(curve, run.batch_size)
        for (source, index, marker_plot), marker in self.running.markers.items():
            run = self.sources[source].runs.get(index) if source in self.sources else None
            if run is not None and marker_plot == plot_id:
                dimmed = bool(self.selection) and (source, index) not in self.selection
                self.running.style(marker, run.batch_size, dimmed)
        for (source, series, batch_size), curve in self.finished.items.items():
            if source in self.sources and SERIES[series][0] == plot_id:
                self._style_curve(curve, batch_size)
        return True

    def _style_curve(self, curve: pg.PlotDataItem, batch_size: int, compare: bool | None = None) -> None:
        """A run's (or group's) pen; a legend sample (run_key None) is never dimmed."""
        colour = self.colours.colour(batch_size)
        key = curve.run_key
        dimmed = key is not None and bool(self.selection) and key not in self.selection
        highlighted = key in self.selection
        compare = key[0] == "compare" if compare is None else compare
        looks = (colour.rgba(), compare, dimmed, highlighted)
        if getattr(curve, "looks", None) == looks:
            return  # restyling a group's symbols redraws all its points (~10 ms a group at 500 runs)
        curve.looks = looks
        pen = run_pen(
            colour,
            compare=compare,
            dimmed=dimmed,
            highlighted=highlighted,
            style=curve.pen_style,
            thin=curve.thin,
        )
        brush = run_brush(colour, dimmed=dimmed)
        # One restyle, not three: setPen, setSymbolPen and setSymbolBrush each set the curve's and its symbols' data
        # again (~1.5 ms a curve; a selection dims every curve). The options stay the item's for its next setData.
        curve.opts.update(pen=pen, symbolPen=pen, symbolBrush=brush)
        curve.curve.setPen(pen)
        if curve.opts.get("symbol") is not None:
            curve.scatter.setPen(pen, update=False)
            curve.scatter.setBrush(brush)
        curve.setZValue(10 if highlighted else 0)

    def curve_count(self, plot_id: str) -> int:
        """How many run curves with data this plot draws, own or in their group (tests, the screenshot script)."""
        own = sum(
            1
            for (_s, _i, series), c in self._curves.items()
            if SERIES[series][0] == plot_id and c.xData is not None and len(c.xData)
        )
        series = [s for s, spec in SERIES.items() if spec[0] == plot_id]
        return own + sum(self.finished.runs(source, s) for source in self.sources for s in series)
