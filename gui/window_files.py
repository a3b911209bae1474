"""Run files in the main window: open (also while being written), compare, reuse settings, export."""

from __future__ import annotations

from pathlib import Path

from batchlab.core.errors import SpecError
from batchlab.gui.bench_compare import show_bench_compare
from batchlab.gui.file_reader import FileReader, read_sweep
from batchlab.gui.files import PLOT_EXPORT_FILTER, PNG_SCALE, png_scale
from batchlab.gui.files import export_plot as save_plot
from batchlab.gui.lr_find_view import RangeTestDialog, is_lr_find_file
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QLabel, QSpinBox

RUN_FILE_FILTER = "Run file (*.h5 *.hdf5)"
PNG_WIDTH_KEY, PNG_DPI_KEY = "export/png_width", "export/png_dpi"
PNG_WIDTH_RANGE = (200, 8000)  # pixels
PNG_DPI_RANGE = (72, 1200)
PNG_DEFAULT_DPI = 192


class PngOptions(QDialog):
    """Width (pixels; the height keeps the plot's proportions) and resolution (dpi) of a PNG export."""

    def __init__(self, parent, plot_width: int, plot_height: int, width: int, dpi: int):
        super().__init__(parent)
        self.setWindowTitle("PNG size")
        self.aspect = plot_height / max(plot_width, 1)
        form = QFormLayout(self)
        self.width_box = QSpinBox()
        self.width_box.setObjectName("png_width")
        self.width_box.setRange(*PNG_WIDTH_RANGE)
        self.width_box.setSuffix(" px")
        self.width_box.setValue(width)
        self.dpi_box = QSpinBox()
        self.dpi_box.setObjectName("png_dpi")
        self.dpi_box.setRange(*PNG_DPI_RANGE)
        self.dpi_box.setSuffix(" dpi")
        self.dpi_box.setValue(dpi)
        self.summary = QLabel()
        self.summary.setProperty("role", "muted")
        self.summary.setWordWrap(True)
        form.addRow("Width", self.width_box)
        form.addRow("Resolution", self.dpi_box)
        form.addRow(self.summary)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.width_box.valueChanged.connect(self._describe)
        self.dpi_box.valueChanged.connect(self._describe)
        self._describe()

    def _describe(self, *_args) -> None:
        w, dpi = self.width_box.value(), self.dpi_box.value()
        h = round(w * self.aspect)
        self.summary.setText(
            f"{w} x {h} pixels; printed at {dpi} dpi: {w / dpi * 2.54:.1f} x {h / dpi * 2.54:.1f} cm. "
            "Text and lines grow with the width, in proportion to the plot."
        )


class FileActionsMixin:
    """The File menu's actions; mixed into MainWindow, which provides the views, followers and settings."""

    def open_file(self, path: str | None = None) -> bool:
        """Open a run file (finished or still being written) as the main sweep; an lr-find file opens in
        the range-test view, whose rates the setup can take. With `read_in_thread` the file is read in a
        worker thread and shown when read (True then means the read started)."""
        if self.running:
            return False
        path = path or QFileDialog.getOpenFileName(self, "Open a run file", self._file_dir(), RUN_FILE_FILTER)[0]
        if not path:
            return False
        if self.open_lr_find(path):
            return True
        data, path = self._open_run_file(self.follower, "main", "Open a run file", path)
        return data is not None

    def _opened_main(self, data, path: str) -> None:
        self.progress = None
        self.settings.setValue("files/open_dir", str(Path(path).parent))
        note = f"; {data.left_out_note}" if data.left_out_note else ""  # a summary-only export says what it lacks
        self.status_label.setText(f"Opened {path} ({data.status_text}, {len(data.runs)} runs){note}")

    def open_lr_find(self, path: str):
        """Show an lr-find file in the range-test view (its rates can go to the setup); None if it is not one."""
        if not self._is_lr_find(path):
            return None
        self.range_view = RangeTestDialog(self, path=path)
        self.range_view.rates_chosen.connect(self.setup.use_lr_find_file)
        self.range_view.show()
        self.recent.add(path)
        self.actions.refresh_recent()
        self.settings.setValue("files/open_dir", str(Path(path).parent))
        self.status_label.setText(f"Opened the LR range test {path}")
        return self.range_view

    @staticmethod
    def _is_lr_find(path: str) -> bool:
        try:
            return is_lr_find_file(path)
        except (SpecError, OSError):
            return False  # _open_run_file says what is wrong with it

    def open_compare(self, path: str | None = None) -> bool:
        """Overlay a second sweep (its curves dashed) on the current one; two benchmark files (batchlab bench)
        also get the comparison table of `batchlab compare` (gui/bench_compare.py)."""
        data, _path = self._open_run_file(self.compare_follower, "compare", "Compare with", path)
        return data is not None

    def _opened_compare(self, data, path: str) -> None:
        self.status_label.setText(f"Comparing with {path} ({data.status_text}, {len(data.runs)} runs, dashed)")
        self.bench_compare = show_bench_compare(self, self.data.path if self.data else None, data.path)

    def _open_run_file(self, follower, source: str, title: str, path: str | None):
        """Ask for a path (unless given), read it and show it as `source` (then `follow` it while it is written).

        Returns (data, path): data is None when the user cancelled or the file could not be read (after an
        error dialog), True while it is being read in the worker thread (`read_in_thread`).
        """
        path = path or QFileDialog.getOpenFileName(self, title, self._file_dir(), RUN_FILE_FILTER)[0]
        if not path:
            return None, path
        if source == "compare" and self._is_lr_find(path):
            self.show_error(
                "Cannot compare",
                f"{path} is an LR range test (batchlab lr-find), not a sweep; File → Open shows its curves",
            )
            return None, path
        if self.read_in_thread:
            self.readers[source].start(path, Path(path).name)
            self._show_read_progress(0, 0, path)
            return True, path
        try:
            data = read_sweep(path, Path(path).name)
        except (SpecError, OSError) as e:
            self.show_error("Cannot open the run file", str(e))
            return None, path
        self._file_read(source, data)
        return data, path

    def _make_readers(self) -> None:
        """One reader per sweep shown (main, compare): a second Open replaces the read in flight, not the other."""
        self.read_in_thread = True
        self.readers = {source: FileReader(self) for source in ("main", "compare")}
        for source, reader in self.readers.items():
            reader.progressed.connect(self._show_read_progress)
            reader.read.connect(lambda data, source=source: self._file_read(source, data))
            reader.failed.connect(self._file_read_failed)

    def _show_read_progress(self, done: int, total: int, path: str) -> None:
        """The status bar while a file is read: "Reading runs 120/504 of big.h5…" and the progress bar."""
        name = Path(path).name
        self.status_label.setText(f"Reading runs {done}/{total} of {name}…" if total else f"Reading {name}…")
        self.progress_bar.setVisible(True)
        self.progress_bar.setValue(int(1000 * done / total) if total else 0)
        self.progress_bar.setFormat(f"{100 * done / total:.0f}%" if total else "")

    def _file_read(self, source: str, data) -> None:
        """A file was read (here or in the thread): show it, follow it while it is written, remember it."""
        path = str(data.path)
        (self.follower if source == "main" else self.compare_follower).follow(path, data.label, data)
        if not any(r.busy for r in self.readers.values()):
            self.progress_bar.setVisible(False)
        self._show_sweep(data, source, gradual=self.read_in_thread)
        self.recent.add(path)
        self.actions.refresh_recent()
        (self._opened_main if source == "main" else self._opened_compare)(data, path)

    def _file_read_failed(self, path: str, message: str) -> None:
        """The file could not be read: its one-line error; the window shows what it showed before."""
        if not any(r.busy for r in self.readers.values()):
            self.progress_bar.setVisible(False)
        self.status_label.setText(f"Could not open {Path(path).name}")
        self.show_error("Cannot open the run file", message)

    def close_compare(self) -> None:
        self.readers["compare"].cancel()
        self.compare_follower.stop()
        self._show_sweep(None, "compare")
        if getattr(self, "bench_compare", None) is not None:  # its table compared the sweep just closed
            self.bench_compare.close()
            self.bench_compare = None

    def use_file_settings(self) -> None:
        """Fill the setup panel from the open file's spec, to rerun or vary it."""
        if self.data is not None and self.data.spec:
            self.setup.set_values(dict(self.data.spec))
            self.setup.new_output_name()

    def export_table(self, path: str | None = None) -> str | None:
        """Write the runs table with its context columns to CSV; returns the path written, or None."""
        path = path or QFileDialog.getSaveFileName(self, "Export runs table", self._file_dir(), "CSV (*.csv)")[0]
        if not path:
            return None
        path = path if path.lower().endswith(".csv") else path + ".csv"
        return self._export("runs table", path, self.table.export_csv)

    def export_plot(
        self, plot_id: str, path: str | None = None, width: int | None = None, dpi: int | None = None
    ) -> str | None:
        """Save one plot as PNG or SVG; returns the path written, or None.

        PNG: `width` pixels wide at `dpi` (asked, and remembered, when the path is chosen in a dialog;
        default twice the plot's size on screen).
        """
        if plot_id.startswith(("summary_", "analysis_")):  # a hidden tab is drawn when shown (Refresher.drain)
            (self.summary if plot_id.startswith("summary_") else self.analysis).refresh(force=True)
        widget = {
            **self.live.plots,
            **{f"summary_{k}": v for k, v in self.summary.plots.items()},
            **{f"analysis_{k}": v for k, v in self.analysis.plots.items()},
        }[plot_id]
        asked = path is None
        if asked:
            path, chosen = QFileDialog.getSaveFileName(
                self, "Export plot", str(Path(self._file_dir()) / f"{plot_id}.png"), PLOT_EXPORT_FILTER
            )
            if path and not Path(path).suffix:
                path += ".svg" if "svg" in chosen.lower() else ".png"
        if not path:
            return None
        if asked and path.lower().endswith(".png") and width is None:
            options = self.ask_png_options(widget)
            if options is None:
                return None
            width, dpi = options
        scale = png_scale(widget, width) if width else PNG_SCALE
        return self._export("plot", path, lambda p: save_plot(widget, p, scale=scale, dpi=dpi))

    def ask_png_options(self, widget) -> tuple[int, int] | None:
        """Ask the PNG's width and dpi (last choices remembered); None if cancelled."""
        width = int(self.settings.value(PNG_WIDTH_KEY, round(widget.width() * PNG_SCALE)))
        dpi = int(self.settings.value(PNG_DPI_KEY, PNG_DEFAULT_DPI))
        self.png_dialog = PngOptions(self, widget.width(), widget.height(), width, dpi)
        if self.png_dialog.exec() != QDialog.DialogCode.Accepted:
            return None
        width, dpi = self.png_dialog.width_box.value(), self.png_dialog.dpi_box.value()
        self.settings.setValue(PNG_WIDTH_KEY, width)
        self.settings.setValue(PNG_DPI_KEY, dpi)
        return width, dpi

    def _export(self, what: str, path: str, write) -> str | None:
        """Run one export: the status bar names the file written; a write error is one line in a dialog."""
        try:
            write(path)
        except OSError as e:
            reason = e.strerror or str(e)
            self.status_label.setText(f"Could not export the {what}: {reason}")
            self.show_error(f"Cannot export the {what}", f"{path}: {reason}")
            return None
        self.status_label.setText(f"Exported the {what} to {path}")
        return path

    def _file_dir(self) -> str:
        return str(self.settings.value("files/open_dir", self.setup.output_dir))
