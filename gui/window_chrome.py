"""The main window's theme, Help dialogs and remembered settings (geometry, splitters, the setup's values).
A mixin of gui/main_window.py's MainWindow."""

from __future__ import annotations

import json
from pathlib import Path

from batchlab.gui import help as help_dialogs
from batchlab.gui import theme as themes
from batchlab.gui.plot_style import apply_plot_colours, set_plot_colours
from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import (
    QApplication,
)

BOOL_SETTINGS = (
    "shuffle",
    "nesterov",
    "keep_training",
    "xla",
    "mixed_precision",
)  # setup checkboxes kept in the last setup


class WindowChrome:
    """Theme, Help and settings of MainWindow (see the module docstring)."""

    def apply_theme(self, choice: str) -> None:
        """Switch the window and its plots to a theme ("system", "light", "dark"); remembered in the settings."""
        self.theme_choice = choice if choice in themes.THEME_CHOICES else "system"
        self.theme = t = themes.apply_theme(QApplication.instance(), self.theme_choice)
        self.settings.setValue(themes.THEME_KEY, self.theme_choice)
        set_plot_colours(t.plot_background, t.plot_foreground, t.plot_neutral)
        sheet = themes.stylesheet(t)
        self.setup.widget().setStyleSheet(sheet)
        self.banner.setStyleSheet(sheet)
        self.oom_offer.setStyleSheet(sheet)
        self.table.set_status_colours(t.status_backgrounds)
        self.actions.recolour_icons(t.text)
        for widget in (*self.live.plots.values(), *self.summary.plots.values(), *self.analysis.plots.values()):
            apply_plot_colours(widget)
        self.live.restyle()
        self.summary.restyle()
        self.analysis.restyle()
        self.setup.preview.restyle()
        for name, action in self.actions.theme_actions.items():
            action.setChecked(name == self.theme_choice)
        self.table.viewport().update()

    def show_about(self) -> None:
        self.dialog = help_dialogs.show_about(self, self.devices, self.environment)

    def show_runfile_format(self) -> None:
        self.dialog = help_dialogs.show_runfile_format(self)

    def show_shortcuts(self) -> None:
        self.dialog = help_dialogs.show_shortcuts(self, self.actions)

    def _recolour(self, refresh: bool = True) -> None:
        batches = [b for d in (self.data, self.compare) if d is not None for b in d.batch_sizes()]
        if self.data is not None and self.data.spec.get("batch_sizes"):
            batches += [int(b) for b in self.data.spec["batch_sizes"]]
        if self.colours.update(batches) and refresh:
            self.live.restyle()
            self.summary.restyle()
            self.analysis.restyle()
            self.table.viewport().update()

    def _restore_settings(self) -> None:
        s = self.settings
        for key, restore in (
            ("window/geometry", self.restoreGeometry),
            ("window/state", self.restoreState),
            ("window/splitter", self.splitter.restoreState),
            ("window/right_splitter", self.right_splitter.restoreState),
        ):
            value = s.value(key)
            if isinstance(value, QByteArray):
                restore(value)
        spec = s.value("setup/last_spec")
        if spec:
            try:
                values = json.loads(str(spec))
                self.setup.set_values(values)
                self.setup.new_output_name()
            except (ValueError, TypeError):
                pass

    def save_settings(self) -> None:
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.setValue("window/splitter", self.splitter.saveState())
        s.setValue("window/right_splitter", self.right_splitter.saveState())
        values = {k: v for k, v in self.setup.values().items() if not isinstance(v, bool) or k in BOOL_SETTINGS}
        s.setValue("setup/last_spec", json.dumps(values))
        s.setValue("files/output_dir", str(Path(self.setup.output_path() or self.setup.output_dir).parent))
        s.sync()
