"""Menus, toolbar and keyboard shortcuts of the main window."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from batchlab.gui.analysis_view import PLOTS as ANALYSIS_PLOTS
from batchlab.gui.live_series import PLOTS
from batchlab.gui.summary_view import METRICS
from batchlab.gui.toolbar_icons import media_icon
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu, QStyle

if TYPE_CHECKING:
    from batchlab.gui.main_window import MainWindow


class WindowActions(dict):
    """The window's QActions by name, plus the recent-files menu they keep up to date."""

    def __init__(self, window: MainWindow):
        super().__init__()
        self.window = window
        self.recent_menu: QMenu | None = None
        self.theme_actions: dict[str, QAction] = {}  # View > Theme: "system", "light", "dark"
        self.drawn_icons: dict[str, str] = {}  # action name -> shape drawn in the theme's text colour

    def recolour_icons(self, colour: str) -> None:
        """Draw the theme-coloured icons (Run, Stop) again in `colour`: the theme's text colour."""
        for name, shape in self.drawn_icons.items():
            self[name].setIcon(media_icon(shape, colour))

    def add(self, name: str, text: str, slot, shortcuts=(), icon=None, tip: str = "") -> QAction:
        """`icon`: a QStyle standard pixmap, or "play" / "stop" for an icon drawn in the theme's text colour."""
        action = QAction(text, self.window)
        if shortcuts:
            action.setShortcuts([QKeySequence(s) for s in shortcuts])
        if isinstance(icon, str):
            self.drawn_icons[name] = icon  # drawn by recolour_icons, in the theme's text colour
        elif icon is not None:
            action.setIcon(self.window.style().standardIcon(icon))
        shortcut_text = ", ".join(shortcuts)
        action.setToolTip(f"{tip or text} ({shortcut_text})" if shortcut_text else tip or text)
        action.triggered.connect(lambda _checked=False: slot())
        self.window.addAction(action)  # shortcuts work wherever the focus is
        self[name] = action
        return action

    def refresh_recent(self) -> None:
        menu = self.recent_menu
        if menu is None:
            return
        menu.clear()
        paths = self.window.recent.paths()
        for path in paths:
            action = menu.addAction(Path(path).name)
            action.setToolTip(path)
            action.setStatusTip(path)
            action.triggered.connect(lambda _c=False, p=path: self.window.open_file(p))
        if paths:
            menu.addSeparator()
            menu.addAction("Clear list", self._clear_recent)
        menu.setEnabled(bool(paths))

    def _clear_recent(self) -> None:
        self.window.recent.clear()
        self.refresh_recent()


def build_actions(w: MainWindow) -> WindowActions:
    """Create every action, the File / Sweep / View / Help menus and the toolbar."""
    a = WindowActions(w)
    sp = QStyle.StandardPixmap
    a.add("run", "&Run sweep", w.start_sweep, ("Ctrl+R",), "play", "Run the sweep")
    a.add("stop", "&Stop", w.stop_sweep, ("Ctrl+.", "Esc"), "stop", "Stop after the current step")
    a.add("open", "&Open run file…", w.open_file, ("Ctrl+O",), sp.SP_DialogOpenButton, "Open a run file")
    a.add("compare", "&Compare with…", w.open_compare, (), sp.SP_FileDialogContentsView, "Overlay a second sweep")
    a.add("close_compare", "Close comparison", w.close_compare)
    a.add("use_settings", "Use this file's settings", w.use_file_settings, (), None, "Fill the setup from the file")
    a.add("export_table", "Export runs table (CSV)…", w.export_table, (), sp.SP_DialogSaveButton, "Export CSV")
    a.add("quit", "&Quit", w.close, ("Ctrl+Q",))
    tip = "Search the largest batch size that trains on this device (as batchlab max-batch)"
    a.add("max_batch", "Find &largest batch…", w.find_largest_batch, (), None, tip)
    a.add("about", "&About BatchLab", w.show_about)
    a.add("runfile_format", "The &run file format", w.show_runfile_format)
    a.add("shortcuts", "&Keyboard shortcuts", w.show_shortcuts, ("F1",))

    file_menu = w.menuBar().addMenu("&File")
    for name in ("open",):
        file_menu.addAction(a[name])
    a.recent_menu = file_menu.addMenu("Open &recent")
    file_menu.addAction(a["compare"])
    file_menu.addAction(a["close_compare"])
    file_menu.addAction(a["use_settings"])
    file_menu.addSeparator()
    file_menu.addAction(a["export_table"])
    plots_menu = file_menu.addMenu("Export &plot (PNG or SVG)")
    for plot_id, (title, *_rest) in PLOTS.items():
        plots_menu.addAction(f"Live: {title}", lambda p=plot_id: w.export_plot(p))
    for metric, (title, *_rest) in METRICS.items():
        plots_menu.addAction(f"Summary: {title}", lambda m=metric: w.export_plot(f"summary_{m}"))
    for plot_id, (title, *_rest) in ANALYSIS_PLOTS.items():
        plots_menu.addAction(f"Analysis: {title}", lambda p=plot_id: w.export_plot(f"analysis_{p}"))
    file_menu.addSeparator()
    file_menu.addAction(a["quit"])
    sweep_menu = w.menuBar().addMenu("&Sweep")
    sweep_menu.addAction(a["run"])
    sweep_menu.addAction(a["stop"])
    tools_menu = w.menuBar().addMenu("&Tools")
    tools_menu.addAction(a["max_batch"])
    view_menu = w.menuBar().addMenu("&View")
    theme_menu = view_menu.addMenu("&Theme")
    group = QActionGroup(w)
    for name, text in (("system", "Follow the &system"), ("light", "&Light"), ("dark", "&Dark")):
        action = theme_menu.addAction(text, lambda n=name: w.apply_theme(n))
        action.setCheckable(True)
        action.setObjectName(f"theme_{name}")
        group.addAction(action)
        a.theme_actions[name] = action
    help_menu = w.menuBar().addMenu("&Help")
    for name in ("shortcuts", "runfile_format"):
        help_menu.addAction(a[name])
    help_menu.addSeparator()
    help_menu.addAction(a["about"])

    toolbar = w.addToolBar("Main")
    toolbar.setObjectName("main_toolbar")
    for name in ("run", "stop", "open", "compare", "export_table"):
        toolbar.addAction(a[name])
    a.refresh_recent()
    return a
