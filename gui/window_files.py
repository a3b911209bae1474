"""Run files in the main window: open (also while being written), compare, reuse settings, export."""

from __future__ import annotations

from pathlib import Path

from batchlab.core.spec import SpecError
from batchlab.gui.files import PLOT_EXPORT_FILTER
from batchlab.gui.files import export_plot as save_plot
from PySide6.QtWidgets import QFileDialog

RUN_FILE_FILTER = "Run file (*.h5 *.hdf5)"


class FileActionsMixin:
    """The File menu's actions; mixed into MainWindow, which provides the views, followers and settings."""

    def open_file(self, path: str | None = None) -> bool:
        """Open a run file (finished or still being written) as the main sweep."""
        if self.running:
            return False
        data, path = self._open_run_file(self.follower, "main", "Open a run file", path)
        if data is None:
            return False
        self.progress = None
        self.settings.setValue("files/open_dir", str(Path(path).parent))
        self.status_label.setText(f"Opened {path} ({data.status}, {len(data.runs)} runs)")
        return True

    def open_compare(self, path: str | None = None) -> bool:
        """Overlay a second sweep (its curves dashed) on the current one."""
        data, _path = self._open_run_file(self.compare_follower, "compare", "Compare with", path)
        return data is not None

    def _open_run_file(self, follower, source: str, title: str, path: str | None):
        """Ask for a path (unless given), read it through `follower` and show it as `source`.

        Returns (data, path); data is None when the user cancelled or the file could not be read
        (after an error dialog).
        """
        path = path or QFileDialog.getOpenFileName(self, title, self._file_dir(), RUN_FILE_FILTER)[0]
        if not path:
            return None, path
        try:
            data = follower.open(path, Path(path).name)
        except (SpecError, OSError) as e:
            self.show_error("Cannot open the run file", str(e))
            return None, path
        self._show_sweep(data, source)
        self.recent.add(path)
        self.actions.refresh_recent()
        return data, path

    def close_compare(self) -> None:
        self.compare_follower.stop()
        self._show_sweep(None, "compare")

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

    def export_plot(self, plot_id: str, path: str | None = None) -> str | None:
        """Save one plot as PNG (twice its size on screen) or SVG; returns the path written, or None."""
        widget = {**self.live.plots, **{f"summary_{k}": v for k, v in self.summary.plots.items()}}[plot_id]
        if path is None:
            path, chosen = QFileDialog.getSaveFileName(
                self, "Export plot", str(Path(self._file_dir()) / f"{plot_id}.png"), PLOT_EXPORT_FILTER
            )
            if path and not Path(path).suffix:
                path += ".svg" if "svg" in chosen.lower() else ".png"
        if not path:
            return None
        return self._export("plot", path, lambda p: save_plot(widget, p))

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
