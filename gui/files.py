"""Run files in the window: loading (also files still being written), recent files, exports."""

from __future__ import annotations

import os
from pathlib import Path

import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401 - registers pg.exporters
from batchlab.core.model import SweepData
from PySide6.QtCore import QFileSystemWatcher, QObject, QSettings, QTimer, Signal
from PySide6.QtGui import QPainter
from PySide6.QtSvg import QSvgGenerator

RECENT_KEY = "files/recent"
RECENT_LIMIT = 10
FOLLOW_POLL_MS = 1000  # fallback to the file watcher: HDF5 appends do not always notify
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

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.path: str | None = None
        self.label = ""
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
        self.path, self.label = path, label
        self._stamp = self._file_stamp()
        if data.status == "running":
            self._watcher.addPath(path)
            self._timer.start()
        return data

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
            return
        try:
            data = load_sweep(self.path, self.label)
        except Exception as e:  # noqa: BLE001 - a half-written chunk: try again on the next tick
            self.read_failed.emit(str(e))
            return
        self._stamp = stamp
        if data.status != "running":
            self.stop()
        self.loaded.emit(data)


def export_plot(widget: pg.PlotWidget, path: str) -> None:
    """Save one plot as PNG (pyqtgraph's exporter, at least 800 px wide) or SVG (by the file's suffix).

    SVG goes through QSvgGenerator: pyqtgraph 0.14's SVGExporter cannot parse the path data
    Qt 6.11 writes and raises ValueError.
    """
    if path.lower().endswith(".svg"):
        generator = QSvgGenerator()
        generator.setFileName(path)
        generator.setSize(widget.size())
        generator.setViewBox(widget.rect())
        generator.setTitle(widget.getPlotItem().titleLabel.text or "BatchLab plot")
        painter = QPainter(generator)
        try:
            widget.render(painter)
        finally:
            painter.end()
        return
    exporter = pg.exporters.ImageExporter(widget.getPlotItem())
    exporter.parameters()["width"] = max(800, int(widget.width() * 2))
    exporter.export(path)
