"""Run files in the window: loading (also files still being written), recent files, exports."""

from __future__ import annotations

import contextlib
import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401 - registers pg.exporters
from batchlab.core.model import SweepData
from batchlab.core.runfile.liveness import WRITER_ALIVE, WRITER_GONE, writer_state
from PySide6.QtCore import QBuffer, QFileSystemWatcher, QIODevice, QObject, QRectF, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator

RECENT_KEY = "files/recent"
RECENT_LIMIT = 10
FOLLOW_POLL_MS = 1000  # fallback to the file watcher: HDF5 appends do not always notify
# A followed file that has not changed for this long (s) while its writer process is gone will never
# change again: its writer was killed. A live writer may be silent far longer (it flushes at epoch ends).
STALE_S = 5.0
# The same where the writer cannot be checked (a file written on another host, or before the writer's
# pid was recorded): only a long silence says it stopped.
STALE_UNKNOWN_S = 600.0
PNG_SCALE = 2.0  # PNG export: twice the widget's size (192 dpi)
PLOT_EXPORT_FILTER = "PNG image (*.png);;SVG drawing (*.svg)"


def load_sweep(path: str | os.PathLike, label: str = "") -> SweepData:
    """Read a run file into the window's model; raises batchlab.core.runfile.RunFileError if it cannot."""
    return SweepData.from_file(path, label=label)


class RecentFiles:
    """Most-recently-opened run files, newest first, kept in QSettings."""

    def __init__(self, settings: QSettings):
        self.settings = settings

    def paths(self) -> list[str]:
        value = self.settings.value(RECENT_KEY, [])
        if isinstance(value, str):
            value = [value]
        return [str(p) for p in (value or [])]

    def add(self, path: str | os.PathLike) -> None:
        path = str(Path(path).resolve())
        paths = [path] + [p for p in self.paths() if p != path]
        self.settings.setValue(RECENT_KEY, paths[:RECENT_LIMIT])

    def clear(self) -> None:
        self.settings.remove(RECENT_KEY)


class RunFileFollower(QObject):
    """Re-reads a run file when it changes while its sweep is still writing it (read-only)."""

    loaded = Signal(object)  # SweepData
    read_failed = Signal(str)
    writer_stopped = Signal(str)  # why: the followed file will not change again, its writer is gone

    def __init__(self, parent: QObject | None = None, clock=time.monotonic):
        super().__init__(parent)
        self.path: str | None = None
        self.label = ""
        self.stale_s = STALE_S
        self.stale_unknown_s = STALE_UNKNOWN_S
        self._clock = clock
        self._changed_at = 0.0  # when the file last changed (clock)
        self._attrs: dict = {}  # the file's root attributes as last read (who writes it)
        self._stamp: tuple[float, int] | None = None
        self._watcher = QFileSystemWatcher(self)
        self._watcher.fileChanged.connect(self.check)
        self._timer = QTimer(self)
        self._timer.setInterval(FOLLOW_POLL_MS)
        self._timer.timeout.connect(self.check)

    @property
    def following(self) -> bool:
        return self._timer.isActive()

    def open(self, path: str, label: str = "") -> SweepData:
        """Load the file now (errors raise) and keep re-reading it while its status is "running"."""
        self.stop()
        data = load_sweep(path, label)
        self.follow(path, label, data)
        return data

    def follow(self, path: str, label: str, data: SweepData) -> None:
        """`data` was just read from `path` (here or in a worker thread): keep re-reading it while it is "running"."""
        self.stop()
        self.path, self.label = path, label
        self._stamp = self._file_stamp()
        self._changed_at = self._clock()
        self._attrs = data.file_attrs
        if data.status == "running":
            self._watcher.addPath(path)
            self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        if self._watcher.files():
            self._watcher.removePaths(self._watcher.files())
        self.path = None

    def _file_stamp(self) -> tuple[float, int] | None:
        try:
            st = os.stat(self.path)
        except (OSError, TypeError):
            return None
        return (st.st_mtime, st.st_size)

    def check(self, *_args) -> None:
        if self.path is None:
            return
        stamp = self._file_stamp()
        if stamp is None or stamp == self._stamp:
            self._check_writer()
            return
        try:
            data = load_sweep(self.path, self.label)
        except Exception as e:  # noqa: BLE001 - a half-written chunk: try again on the next tick
            self.read_failed.emit(str(e))
            return
        self._stamp = stamp
        self._changed_at = self._clock()
        self._attrs = data.file_attrs
        if data.status != "running":
            self.stop()
        self.loaded.emit(data)

    def _check_writer(self) -> None:
        """Stop following a file that has been still for a while and whose writer is gone (or silent for long)."""
        quiet = self._clock() - self._changed_at
        if quiet < self.stale_s:
            return
        state = writer_state(self._attrs)
        if state == WRITER_ALIVE:
            return
        if state == WRITER_GONE:
            why = f"writer stopped; file incomplete (its process {self._attrs.get('writer_pid')} is gone)"
        elif quiet >= self.stale_unknown_s:
            why = f"writer stopped?; file incomplete (no change for {quiet / 60:.0f} min; its writer cannot be checked)"
        else:
            return
        self.stop()
        self.writer_stopped.emit(why)


@contextlib.contextmanager
def _exporting(widget: pg.PlotWidget, pen_scale: float = 1.0):
    """While painting an export: every item in pyqtgraph's export mode, curve pens `pen_scale` wider.

    Export mode draws scatter symbols as vector paths, not stamped from pyqtgraph's pixmap atlas
    (which QSvgGenerator writes as the whole atlas image, squeezed, at every point). Curve pens are
    cosmetic: a device pixel ratio does not widen them, so a 2x PNG would get hairlines beside
    twice-as-large text; their pens are swapped in opts (what paint reads), not set through
    setPen, which would invalidate the bounds and could move the view while it is being drawn.
    """
    # Items the live plots cache as device pixmaps (gui/live_plots.py) are painted afresh: a cached
    # pixmap would be written into an SVG as an image, and into a 2x PNG at 1x.
    cached = [(item, item.cacheMode()) for item in widget.scene().items() if item.cacheMode() != item.CacheMode.NoCache]
    for item, _mode in cached:
        item.setCacheMode(item.CacheMode.NoCache)
    items = [item for item in widget.scene().items() if hasattr(item, "setExportMode")]
    pens: list[tuple[pg.GraphicsObject, str, object]] = []
    for item in items:
        item.setExportMode(True, {"antialias": True})
        # PlotDataItem's pen is what the legend's sample line is drawn with
        if pen_scale != 1 and isinstance(item, (pg.PlotCurveItem, pg.PlotDataItem)):
            for kind in ("pen", "shadowPen"):
                spec = item.opts.get(kind)
                pen = None if spec is None else pg.mkPen(spec)
                if pen is not None and pen.isCosmetic() and pen.style() != Qt.PenStyle.NoPen:
                    pen.setWidthF(max(pen.widthF(), 1.0) * pen_scale)
                    pens.append((item, kind, spec))
                    item.opts[kind] = pen
    try:
        yield
    finally:
        for item, kind, spec in pens:
            item.opts[kind] = spec
        for item in items:
            item.setExportMode(False)
        for item, mode in cached:
            item.setCacheMode(mode)


def _render(widget: pg.PlotWidget, device, pen_scale: float = 1.0) -> None:
    """Paint the plot as shown onto `device` (in the widget's own pixels)."""
    painter = QPainter(device)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
    try:
        with _exporting(widget, pen_scale):
            source = QRectF(widget.viewport().rect())
            target = QRectF(0, 0, source.width(), source.height())
            widget.render(painter, target, source.toRect())
    finally:
        painter.end()


_MATRIX = re.compile(r"matrix\(([^)]*)\)")
_NUMBER = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_PAIR = re.compile(rf"({_NUMBER}),({_NUMBER})")


def _moved(text: str, matrix: tuple[float, ...]) -> str:
    """Every "x,y" pair in SVG path data or polyline points, mapped through an SVG matrix(a..f)."""
    a, b, c, d, e, f = matrix

    def one(m: re.Match) -> str:
        x, y = float(m.group(1)), float(m.group(2))
        return f"{a * x + c * y + e:.6g},{b * x + d * y + f:.6g}"

    return _PAIR.sub(one, text)


def _flatten_scaled_strokes(svg: bytes) -> bytes:
    """Move view-box transforms into the coordinates of the strokes drawn under them.

    Qt draws data curves in data units under a group transform (e.g. matrix(82,0,0,-5.3,...)) with
    vector-effect="non-scaling-stroke"; renderers without that SVG Tiny 1.2 feature (librsvg,
    ImageMagick) then scale the 1 px pen by the view transform. With the transform applied to the
    points (Qt writes only absolute M/L/C/Z path commands and polyline points) every renderer agrees.
    """
    ns = "http://www.w3.org/2000/svg"
    ET.register_namespace("", ns)
    ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")
    root = ET.fromstring(svg)
    for group in root.iter(f"{{{ns}}}g"):
        match = _MATRIX.fullmatch(group.get("transform", ""))
        if match is None:
            continue
        a, b, c, d, e, f = (float(v) for v in match.group(1).split(","))
        if (a, b, c, d, e, f) == (1, 0, 0, 1, 0, 0) or len(group) == 0:
            continue
        points = {f"{{{ns}}}path": "d", f"{{{ns}}}polyline": "points", f"{{{ns}}}polygon": "points"}
        shapes = [el for el in group if el.tag in points and el.get("vector-effect") == "non-scaling-stroke"]
        if len(shapes) != len(group):
            continue
        for shape in shapes:
            attr = points[shape.tag]
            shape.set(attr, _moved(shape.get(attr, ""), (a, b, c, d, e, f)))
        group.set("transform", "matrix(1,0,0,1,0,0)")
    return ET.tostring(root, encoding="UTF-8", xml_declaration=True)


def export_plot(widget: pg.PlotWidget, path: str, scale: float = PNG_SCALE, dpi: float | None = None) -> str:
    """Save one plot as it looks in the window, as SVG or PNG (by the file's suffix); returns the path.

    PNG: the widget rendered at `scale` times its size (text, pens and symbols all scaled alike),
    tagged with `dpi` dots per inch (default: the screen's times `scale`, so it prints at the size
    shown). Scaling the whole drawing keeps text proportional: a wider image has larger text.
    SVG: the widget through QSvgGenerator, in the widget's own
    pixels. pyqtgraph 0.14's SVGExporter cannot parse the path data Qt 6.11 writes (ValueError).
    Raises OSError (with its strerror) if the file cannot be written.
    """
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if path.lower().endswith(".svg"):
        generator = QSvgGenerator()
        generator.setOutputDevice(buffer)
        generator.setSize(widget.size())
        generator.setViewBox(widget.rect())
        # The axes replay QPictures recorded at the screen's resolution: the same resolution here,
        # or Qt rescales them (by 72/96) and the tick labels drift off the data.
        generator.setResolution(widget.logicalDpiX())
        generator.setTitle(widget.getPlotItem().titleLabel.text or "BatchLab plot")
        _render(widget, generator)
        return write_export(path, _flatten_scaled_strokes(bytes(buffer.data())))
    image = QImage(round(widget.width() * scale), round(widget.height() * scale), QImage.Format.Format_ARGB32)
    # A device pixel ratio, not a painter scale: pyqtgraph draws symbols and the legend after
    # resetTransform(), which would drop a scale but keeps the ratio, so everything grows alike.
    image.setDevicePixelRatio(scale)
    image.fill(widget.backgroundBrush().color())
    _render(widget, image, pen_scale=scale)
    # Tagged after painting: a higher resolution while painting would enlarge the text once more.
    dots_per_metre = round((dpi if dpi else widget.logicalDpiX() * scale) / 0.0254)
    image.setDotsPerMeterX(dots_per_metre)
    image.setDotsPerMeterY(dots_per_metre)
    image.save(buffer, "PNG")
    return write_export(path, bytes(buffer.data()))


def png_scale(widget: pg.PlotWidget, width_px: int) -> float:
    """The scale at which a PNG of the plot is `width_px` pixels wide (its height follows)."""
    return max(width_px, 1) / max(widget.width(), 1)


def write_export(path: str, data: bytes) -> str:
    """Write an export (plot or table) in one go; OSError (unwritable folder, disk full) leaves no
    half-written file."""
    with open(path, "wb") as f:
        try:
            f.write(data)
            f.flush()
        except OSError:
            with contextlib.suppress(OSError):
                f.close()
            if os.path.isfile(path):  # never a device such as /dev/full
                with contextlib.suppress(OSError):
                    os.remove(path)
            raise
    return path
