"""The window at 1024x700 and 150% scaling, its light and dark themes, the compare banner and the Help menu."""

from __future__ import annotations

import re

import pytest
from batchlab.core.presets import PRESETS
from batchlab.gui import help as help_dialogs
from batchlab.gui import theme as themes
from batchlab.gui.plot_axes import Log2Axis
from batchlab.gui.plot_style import LEGEND_MAX_SHARE
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QFontMetrics, QPalette
from PySide6.QtWidgets import QApplication, QLabel

from tests.gui.synthetic import write_run_file


@pytest.fixture
def light_afterwards():
    """Themes change the whole application's palette: later tests get the light one back."""
    yield
    themes.apply_theme(QApplication.instance(), "light")


def clipped_headers(table) -> list[str]:
    """Visible column headers narrower than their text needs."""
    header = table.horizontalHeader()
    return [
        table.model().headerData(c, Qt.Orientation.Horizontal)
        for c in range(header.count())
        if not header.isSectionHidden(c) and header.sectionSize(c) < header.sectionSizeHint(c)
    ]


def clipped_cells(table) -> list[str]:
    """Visible cells whose text is wider than their column (less the cell's margins)."""
    metrics, header, model = table.fontMetrics(), table.horizontalHeader(), table.model()
    out = []
    for row in range(model.rowCount()):
        for column in range(model.columnCount()):
            if header.isSectionHidden(column):
                continue
            text = str(model.index(row, column).data() or "")
            icon = 20 if model.index(row, column).data(Qt.ItemDataRole.DecorationRole) is not None else 0
            if metrics.horizontalAdvance(text) + icon + 6 > header.sectionSize(column):
                out.append(text)
    return out


def test_window_fits_1024x700_and_150_percent_of_a_1600x1000_screen(main_window):
    w = main_window
    hint = w.minimumSizeHint()
    # 150% of 1600x1000 leaves 1066x666 logical pixels, less the title bar and a panel
    assert hint.width() <= 1024 and hint.height() <= 600, hint
    w.resize(1024, 700)
    QApplication.processEvents()
    assert (w.width(), w.height()) == (1024, 700)
    assert not clipped_headers(w.table), "empty table"
    for plot in w.live.plots.values():
        assert plot.width() >= 150 and plot.height() >= 100


def test_runs_table_headers_and_numbers_whole_and_sweep_column_only_when_comparing(main_window, tmp_path):
    w = main_window
    w.resize(1024, 700)
    a = write_run_file(tmp_path / "a-sweep-with-a-rather-long-file-name-indeed.h5", batch_sizes=(8, 64, 512))
    b = write_run_file(tmp_path / "b.h5", batch_sizes=(32,), epochs=1)
    assert w.open_file(a)
    QApplication.processEvents()
    assert w.table.isColumnHidden(0)  # one sweep: no sweep column repeating its file name
    assert w.table.isColumnHidden(4)  # one seed: no seed column
    assert not clipped_headers(w.table) and not clipped_cells(w.table)
    assert w.open_compare(b)
    QApplication.processEvents()
    assert not w.table.isColumnHidden(0)
    assert not clipped_headers(w.table)
    header = w.table.horizontalHeader()
    assert header.sectionSize(0) <= 220  # a long sweep name is elided, the numbers keep their room
    numbers = [c for c in clipped_cells(w.table) if not c.startswith("a-sweep")]
    assert not numbers
    w.close_compare()
    assert w.table.isColumnHidden(0)


def test_every_column_of_one_sweep_in_view_at_1440x900(main_window, tmp_path):
    """ "final loss" was cut off at 1440x900: the columns now fit the table without scrolling sideways."""
    w = main_window
    w.resize(1440, 900)
    assert w.open_file(write_run_file(tmp_path / "s.h5", batch_sizes=(8, 16, 32, 64, 128, 256, 512)))
    QApplication.processEvents()
    header = w.table.horizontalHeader()
    assert header.length() <= w.table.viewport().width()
    assert not clipped_headers(w.table) and not clipped_cells(w.table)


def test_batch_size_ticks_are_thinned_where_labels_would_touch(qapp):
    axis = Log2Axis(orientation="bottom")
    wide = axis.tickValues(3.0, 9.0, 1000)  # batch 8 .. 512 on a wide plot: every size labelled
    assert wide == [(1.0, [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])]
    assert axis.tickStrings(wide[0][1], 1, 1.0) == ["8", "16", "32", "64", "128", "256", "512"]
    narrow = axis.tickValues(3.0, 9.0, 120)  # the 1024 px window: "64128256512" before
    spacing, labelled = narrow[0]
    assert spacing > 1 and len(labelled) < 7
    widest = max(QFontMetrics(axis.font()).horizontalAdvance(s) for s in axis.tickStrings(labelled, 1, spacing))
    assert spacing * 120 / (9.0 - 3.0) > widest  # labels at least their width apart
    assert set(axis.tickStrings(narrow[1][1], 1, narrow[1][0])) == {""}  # the others: unlabelled ticks
    # labelled from the smallest batch on: the time split's bars at 32, 128 and 512 had no label, 64 and 256 did
    assert axis.tickValues(4.6, 9.4, 120)[0][1] == [5.0, 7.0, 9.0]
    # nothing outside the range: its grid line was a stray line left of the y axis in an SVG export
    levels = axis.tickValues(2.6, 9.4, 1000)
    assert [v for _, values in levels for v in values] == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]


@pytest.mark.parametrize("name", ["light", "dark"])
def test_theme_text_is_readable_and_plots_follow(main_window, light_afterwards, name):
    w = main_window
    w.setup.set_values({"epochs": "x"})  # an error message under a field
    w.open_compare(write_run_file(w.settings.fileName() + ".b.h5", epochs=1))
    w.open_file(write_run_file(w.settings.fileName() + ".a.h5", epochs=2))
    QApplication.processEvents()  # legends filled in the theme before, then switched
    w.actions.theme_actions["dark" if name == "light" else "light"].trigger()
    w.actions.theme_actions[name].trigger()
    QApplication.processEvents()
    theme = themes.THEMES[name]
    assert w.theme is theme and w.theme_choice == name and w.settings.value(themes.THEME_KEY) == name
    panel_bg = w.setup.widget().palette().color(QPalette.ColorRole.Window)
    assert panel_bg == QApplication.palette().color(QPalette.ColorRole.Window) == themes.palette(theme).window().color()
    labels = {
        "preset description": w.setup.preset_description,
        "error text": w.setup._error_labels["epochs"],
        "field label": next(q for q in w.setup.findChildren(QLabel) if q.text() == "Epochs"),
    }
    for what, label in labels.items():
        assert label.isVisible(), what
        fg = label.palette().color(label.foregroundRole())
        assert themes.contrast_ratio(fg, panel_bg) >= themes.MIN_CONTRAST, (what, fg.name(), panel_bg.name())
    error_colour = w.setup._error_labels["epochs"].palette().color(QPalette.ColorRole.WindowText)
    assert error_colour.name() == theme.error_text.lower()
    banner = w.banner
    assert banner.isVisible()
    fg, bg = banner.palette().color(banner.foregroundRole()), banner.palette().color(QPalette.ColorRole.Window)
    assert fg.name() == theme.banner_text.lower() and bg.name() == theme.banner_background.lower()
    assert themes.contrast_ratio(fg, bg) >= themes.MIN_CONTRAST
    text = QApplication.palette().color(QPalette.ColorRole.Text)
    for status, colour in theme.status_backgrounds.items():
        assert themes.contrast_ratio(text, colour) >= themes.MIN_CONTRAST, status
    for plot in (*w.live.plots.values(), *w.summary.plots.values(), *w.analysis.plots.values()):
        background = plot.backgroundBrush().color()
        assert background.name() == theme.plot_background.lower()
        for axis in ("left", "bottom"):
            ink = plot.getPlotItem().getAxis(axis).textPen().color()
            assert themes.contrast_ratio(ink, background) >= themes.MIN_CONTRAST
        for _sample, label in plot.getPlotItem().legend.items:  # the colour the text is drawn in
            drawn = re.search(r"color:\s*(#[0-9a-fA-F]{6})", label.item.toHtml()).group(1)
            assert themes.contrast_ratio(drawn, background) >= themes.MIN_CONTRAST, (label.text, drawn)
    # every curve colour stands out from the plot background (the palette's black is drawn light on dark)
    for batch in (8, 16, 32, 64, 128, 256, 512, 1024):
        assert themes.contrast_ratio(w.colours.colour(batch), theme.plot_background) >= 1.8, batch


def test_theme_is_remembered(qtbot, tmp_path, light_afterwards):
    from batchlab.gui.main_window import MainWindow

    settings = QSettings(str(tmp_path / "theme.ini"), QSettings.Format.IniFormat)
    first = MainWindow(settings)
    qtbot.addWidget(first)
    assert first.theme_choice == "system" and first.actions.theme_actions["system"].isChecked()
    first.apply_theme("dark")
    first.close()
    second = MainWindow(settings)
    qtbot.addWidget(second)
    assert second.theme.name == "dark" and second.actions.theme_actions["dark"].isChecked()
    assert second.live.plots["loss_step"].backgroundBrush().color().name() == themes.DARK.plot_background.lower()
    second.close()


def test_contrast_ratio_known_answers():
    assert themes.contrast_ratio("#000000", "#FFFFFF") == pytest.approx(21.0)
    assert themes.contrast_ratio("#777777", "#FFFFFF") == pytest.approx(4.48, abs=0.01)
    assert themes.contrast_ratio("#FFFFFF", "#FFFFFF") == pytest.approx(1.0)


def test_banner_lists_the_settings_in_which_compared_sweeps_differ(main_window, tmp_path):
    w = main_window
    assert w.open_file(write_run_file(tmp_path / "ten.h5", batch_sizes=(16, 64), epochs=10, samples=256))
    assert not w.banner.isVisible()  # one sweep: nothing to compare
    assert w.open_compare(write_run_file(tmp_path / "same.h5", batch_sizes=(16, 64), epochs=10, samples=256))
    assert not w.banner.isVisible()  # same settings: no banner
    assert w.open_compare(write_run_file(tmp_path / "one.h5", batch_sizes=(16,), epochs=1, samples=256))
    assert w.banner.isVisible()
    lines = w.banner.text().splitlines()
    assert lines[0] == "These sweeps were measured with different settings:"
    assert lines[1:] == ["ten.h5 (solid): epochs 10, batch_sizes 16, 64", "one.h5 (dashed): epochs 1, batch_sizes 16"]
    assert w.banner.mapTo(w, w.banner.rect().bottomLeft()).y() <= w.views.mapTo(w, w.views.rect().topLeft()).y()
    w.close_compare()
    assert not w.banner.isVisible()


def test_help_menu_about_format_and_shortcuts(main_window, monkeypatch, tmp_path):
    w = main_window
    menus = {a.text().replace("&", ""): a.menu() for a in w.menuBar().actions()}
    help_texts = [a.text().replace("&", "") for a in menus["Help"].actions() if a.text()]
    assert help_texts == ["Keyboard shortcuts", "The run file format", "About BatchLab"]
    w.actions["about"].trigger()
    about = w.dialog.findChild(help_dialogs.QTextBrowser, "help_text").toPlainText()
    assert w.dialog.isVisible()
    for name, version in help_dialogs.versions().items():
        assert f"{name}\n{version}" in about or f"{name}\t{version}" in about, (name, about)
    assert (
        f"TensorFlow\t{help_dialogs.TRAINING_LATER}" in about or f"TensorFlow\n{help_dialogs.TRAINING_LATER}" in about
    )
    devices = [{"name": "gpu:0", "description": "NVIDIA H200", "memory_bytes": 141 << 30}]
    w._on_environment({"devices": devices, "tensorflow_version": "2.99.1", "keras_version": "3.77.0"})
    w.dialog.close()
    w.show_about()
    about = w.dialog.findChild(help_dialogs.QTextBrowser).toPlainText()
    assert "gpu:0: NVIDIA H200, 141 GiB" in about
    for name, version in (("TensorFlow", "2.99.1"), ("Keras", "3.77.0")):  # as `batchlab report` prints them
        assert f"{name}\n{version}" in about or f"{name}\t{version}" in about, (name, about)
    w.dialog.close()
    w.actions["runfile_format"].trigger()
    text = w.dialog.findChild(help_dialogs.QTextBrowser).toPlainText()
    assert "format_version" in text and len(text) > 2000  # the whole of docs/runfile-format.md
    w.dialog.close()
    monkeypatch.setattr(help_dialogs, "RUNFILE_DOC", tmp_path / "not-installed.md")  # a wheel without docs/
    w.show_runfile_format()
    assert "This copy of BatchLab does not include" in w.dialog.findChild(help_dialogs.QTextBrowser).toPlainText()
    w.dialog.close()
    w.actions["shortcuts"].trigger()
    shortcuts = w.dialog.findChild(help_dialogs.QTextBrowser).toPlainText()
    for what, keys in (("Run sweep", "Ctrl+R"), ("Stop", "Ctrl+. (full stop) or Esc"), ("Open run file", "Ctrl+O")):
        assert what in shortcuts and keys in shortcuts, shortcuts
    w.dialog.close()


def test_about_names_devices_without_tensorflow(monkeypatch):
    monkeypatch.setattr(help_dialogs, "nvml_gpus", lambda: [])
    assert help_dialogs.device_lines([]) == [help_dialogs.DEVICES_LATER]
    monkeypatch.setattr(help_dialogs, "nvml_gpus", lambda: ["NVIDIA H200, 141 GiB"])
    assert help_dialogs.device_lines([])[0].startswith("gpu:0: NVIDIA H200, 141 GiB (seen by NVML")


def test_ctrl_r_on_invalid_fields_says_why_and_focuses_the_first(main_window, qtbot):
    w = main_window
    w.activateWindow()
    qtbot.waitActive(w)
    w.setup.set_values({"epochs": "x", "seeds": "y"})
    assert not w.actions["run"].isEnabled()
    qtbot.keyClick(w, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert not w.running
    status = w.status_label.text()
    assert status.startswith("Cannot run yet: Epochs: ") and w.setup.errors["epochs"] in status
    assert QApplication.focusWidget() is w.setup.epochs
    w.setup.set_values({"epochs": "2", "seeds": "0"})
    assert w.actions["run"].isEnabled() and not w.explain_shortcut.isEnabled()  # one owner of Ctrl+R at a time
    assert w.status_label.text() == "Ready"  # the explanation does not outlive the problem


def test_fields_the_optimizer_ignores_are_disabled_and_not_checked(main_window):
    s = main_window.setup
    s.set_values({"optimizer": "adam", "momentum": "2"})
    assert not s.momentum.isEnabled() and s.valid and "momentum" not in s.errors
    s.set_values({"optimizer": "sgd"})
    assert s.momentum.isEnabled() and "momentum" in s.errors
    s.set_values({"optimizer": "rmsprop", "momentum": "0.9"})
    assert s.momentum.isEnabled() and s.valid and s.spec().momentum == 0.9
    assert s.lr.isEnabled()
    s.apply_preset("keras-file")
    assert s.values()["optimizer"] == "model" and not s.lr.isEnabled() and not s.momentum.isEnabled()


def test_preset_text_describes_the_current_fields(main_window):
    s = main_window.setup
    s.apply_preset("mnist-autoencoder")
    preset = PRESETS["mnist-autoencoder"]
    assert s.preset_description.text() == preset.description
    epochs = preset.defaults["epochs"]
    assert not s.preset_changes.isVisible()
    tops = {name: editor.mapTo(s.widget(), editor.rect().topLeft()).y() for name, editor in s._editors.items()}
    s.epochs.setText("3")
    assert s.preset_description.text() == preset.description
    assert s.preset_changes.text() == f"Changed from the preset: epochs 3 (preset: {epochs})."
    s.momentum.setText("0.5")
    s.optimizer.setCurrentText("sgd")
    assert f"epochs 3 (preset: {epochs}); optimizer sgd (preset: adam)" in s.preset_changes.text()
    # Typing valid values moves no field: the changes line sits under the last field, not above the first
    QApplication.processEvents()
    moved = {n: e.mapTo(s.widget(), e.rect().topLeft()).y() for n, e in s._editors.items()}
    assert {n: y for n, y in moved.items() if tops[n] != y and s._editors[n].isVisible()} == {}
    assert s.preset_changes.isVisible() and s.preset_changes.y() > max(moved.values())
    s.momentum.setText("x")  # an error in another field (momentum is not even used by adam)
    assert f"epochs 3 (preset: {epochs}); optimizer sgd (preset: adam)." in s.preset_changes.text()
    s.optimizer.setCurrentText("adam")
    s.epochs.setText(str(epochs))
    assert s.preset_description.text() == preset.description


def test_png_export_at_a_chosen_width_and_dpi_keeps_text_in_proportion(main_window, tmp_path, monkeypatch):
    from batchlab.gui import window_files
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QDialog, QFileDialog

    from tests.gui.test_exports import _array, _block_difference

    w = main_window
    assert w.open_file(write_run_file(tmp_path / "p.h5", batch_sizes=(16, 64)))
    QApplication.processEvents()
    widget = w.live.plots["loss_step"]
    target = tmp_path / "loss.png"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), "PNG image (*.png)"))

    def choose(dialog):  # the user types a width and a resolution, then OK
        dialog.width_box.setValue(widget.width() * 3)
        dialog.dpi_box.setValue(300)
        assert "300 dpi" in dialog.summary.text()
        return QDialog.DialogCode.Accepted

    monkeypatch.setattr(window_files.PngOptions, "exec", choose)
    assert w.export_plot("loss_step") == str(target)
    image = QImage(str(target))
    assert image.width() == widget.width() * 3 and abs(image.height() - widget.height() * 3) <= 1
    assert round(image.dotsPerMeterX() * 0.0254) == 300
    assert w.settings.value(window_files.PNG_WIDTH_KEY) == widget.width() * 3  # asked next time with these
    shrunk = image.scaled(widget.width(), widget.height(), Qt.AspectRatioMode.IgnoreAspectRatio,
                          Qt.TransformationMode.SmoothTransformation)  # fmt: skip
    # text, legend and axes grew with the image: shrunk back, it looks like the plot on screen
    assert _block_difference(_array(widget.grab().toImage()), _array(shrunk), block=24) < 25
    monkeypatch.setattr(window_files.PngOptions, "exec", lambda d: QDialog.DialogCode.Rejected)
    target.unlink()
    assert w.export_plot("loss_step") is None and not target.exists()  # cancelled: nothing written


def test_window_opens_inside_a_1600x1000_screen_at_150_percent(tmp_path):
    """A fresh process with QT_SCALE_FACTOR=1.5 on an offscreen 1600x1000 screen (1067x667 logical)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    screen = {"screens": [{"name": "s", "x": 0, "y": 0, "width": 1600, "height": 1000, "logicalDpi": 96, "dpr": 1}]}
    config = tmp_path / "screen.json"
    config.write_text(json.dumps(screen))
    code = (
        "import sys\n"
        "from PySide6.QtWidgets import QApplication\n"
        "from PySide6.QtCore import QSettings\n"
        "app = QApplication([])\n"
        "from batchlab.gui.main_window import MainWindow\n"
        "w = MainWindow(QSettings(sys.argv[1], QSettings.Format.IniFormat)); w.show(); app.processEvents()\n"
        "h = w.table.horizontalHeader()\n"
        "cut = [c for c in range(h.count()) if not h.isSectionHidden(c) and h.sectionSize(c) < h.sectionSizeHint(c)]\n"
        "screen = app.primaryScreen()\n"
        "print(screen.devicePixelRatio(), screen.availableGeometry().contains(w.frameGeometry()), len(cut))\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "QT_QPA_PLATFORM": f"offscreen:configfile={config}", "QT_SCALE_FACTOR": "1.5"}
    env["PYTHONPATH"] = str(root)
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "s.ini")], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["1.5", "True", "0"], out.stdout


@pytest.mark.parametrize(("width", "height"), [(1024, 700), (1440, 900)])
def test_plots_never_wider_than_their_view_and_legends_fit(main_window, tmp_path, width, height):
    """A legend or title wider than a narrow plot widened its layout past the view: axes and data cut off."""
    w = main_window
    w.resize(width, height)
    assert w.open_file(write_run_file(tmp_path / "l.h5", batch_sizes=(8, 16, 32, 64, 128, 256, 512)))
    for tab in (0, 1):
        w.views.setCurrentIndex(tab)
        w.refresh(full=True)
        QApplication.processEvents()
        for name, plot in {**w.live.plots, **w.summary.plots}.items():
            if not plot.isVisible():
                continue
            item = plot.getPlotItem()
            assert item.width() <= plot.viewport().width() + 1, (name, item.width(), plot.viewport().width())
            legend = item.legend
            if legend is not None and legend.isVisible():
                box = legend.sceneBoundingRect()
                assert box.right() <= plot.viewport().width() + 1, name
                assert box.height() <= LEGEND_MAX_SHARE * item.height() + 1, name  # the data keeps its room
    if width >= 1440:  # room enough: the batch sizes are named beside the loss curves
        assert w.live.plots["loss_step"].getPlotItem().legend.isVisible()


def drawn_colours(plot) -> list[tuple[str, str, object]]:
    """(what, "line"/"text", colour) for every pen, brush and text a plot draws, legend and title included."""
    import pyqtgraph as pg

    item = plot.getPlotItem()
    out = []

    def add_pen(what, pen):
        pen = pg.mkPen(pen)
        if pen.style() != Qt.PenStyle.NoPen:
            out.append((what, "line", pen.color()))

    def add_brush(what, brush):
        brush = pg.mkBrush(brush)
        if brush.style() != Qt.BrushStyle.NoBrush:
            out.append((what, "line", brush.color()))

    def add_item(what, it):
        if isinstance(it, pg.PlotDataItem):
            if it.xData is None or not len(it.xData):
                return
            add_pen(what, it.opts["pen"])
            if it.opts["symbol"] is not None:
                add_pen(what + " symbol", it.opts["symbolPen"])
                hollow = getattr(it, "eval_metric", None) is not None  # evaluation points: filled with the background
                add_brush(what + (" hollow symbol" if hollow else " symbol"), it.opts["symbolBrush"])
        elif isinstance(it, pg.ScatterPlotItem):
            for point in it.points():
                add_pen(what + " marker", point.pen())
                add_brush(what + " marker", point.brush())
        elif isinstance(it, pg.BarGraphItem):
            for pen in it.opts.get("pens") or [it.opts.get("pen")]:
                if pen is not None:
                    add_pen(what + " bar", pen)
            for brush in it.opts.get("brushes") or [it.opts.get("brush")]:
                if brush is not None:
                    add_brush(what + " bar", brush)
        elif isinstance(it, pg.TextItem):
            if it.isVisible():
                out.append((what + f" label {it.textItem.toPlainText()!r}", "text", it.color))
        elif isinstance(it, pg.InfiniteLine):
            if it.isVisible():
                add_pen(what, it.pen)

    for it in item.items:
        add_item(type(it).__name__, it)
    for sample, label in item.legend.items:
        add_item(f"legend sample {label.text!r}", sample.item)
        drawn = re.search(r"color:\s*(#[0-9a-fA-F]{6})", label.item.toHtml()).group(1)
        out.append((f"legend text {label.text!r}", "text", drawn))
    if item.titleLabel.text:
        drawn = re.search(r"color:\s*(#[0-9a-fA-F]{6})", item.titleLabel.item.toHtml()).group(1)
        out.append(("title", "text", drawn))
    return out


def _weak_colours(w, background: str) -> tuple[int, list]:
    """(colours checked, those under 3:1 for lines and marks or 4.5:1 for text) of every plot against `background`."""
    checked, weak = 0, []
    for name, plot in {**w.live.plots, **w.summary.plots}.items():
        assert plot.backgroundBrush().color().name() == background.lower()
        for what, kind, colour in drawn_colours(plot):
            checked += 1
            if what.endswith("hollow symbol"):  # the inside of a hollow marker is the plot's own background
                if pg_name(colour) != background.lower():
                    weak.append((name, what, pg_name(colour)))
                continue
            need = 4.5 if kind == "text" else 3.0
            if themes.contrast_ratio(colour, background) < need:
                weak.append((name, what, pg_name(colour)))
    return checked, weak


def test_dark_theme_every_plot_colour_stands_out_also_after_switching_with_plots_drawn(
    main_window, light_afterwards, tmp_path
):
    """Greys hard-coded for the light theme (#444444, #555555) were 1.7:1 and 2.2:1 on the dark plots; in the
    light theme Okabe-Ito's orange (#E69F00) and the "other" grey (#BBBBBB) were 2.25:1 and 1.9:1 on white."""
    w = main_window
    w.resize(1440, 900)
    many = (4, 8, 16, 32, 64, 128, 256, 512)  # the 7th palette colour, #8C564B, is 2.75:1 on dark as it is
    evals = {"eval_every": 10, "target": "val_accuracy=0.45"}  # evaluation points and target lines with labels
    w.open_compare(write_run_file(tmp_path / "b.h5", batch_sizes=many, epochs=2))
    statuses = ["ok"] * 7 + ["oom"]
    w.open_file(write_run_file(tmp_path / "a.h5", batch_sizes=many, statuses=statuses, epochs=2, **evals))
    w.actions.theme_actions["light"].trigger()
    for tab in (0, 1):  # every plot drawn in the light theme first
        w.views.setCurrentIndex(tab)
        w.refresh(full=True)
        QApplication.processEvents()
    checked, weak = _weak_colours(w, themes.LIGHT.plot_background)
    assert not weak, weak
    assert checked > 200
    assert w.live.evals.met_lines("loss_step")  # the target lines and their labels were among them
    w.actions.theme_actions["dark"].trigger()
    for tab in (0, 1):
        w.views.setCurrentIndex(tab)
        w.refresh(full=True)
        QApplication.processEvents()
    checked, weak = _weak_colours(w, themes.DARK.plot_background)
    assert not weak, weak
    kinds = {what.split()[0] for plot in w.summary.plots.values() for what, _k, _c in drawn_colours(plot)}
    assert {"PlotDataItem", "ScatterPlotItem", "TextItem", "title"} <= kinds  # mean line, markers, OOM label
    assert checked > 200


def pg_name(colour) -> str:
    from PySide6.QtGui import QColor

    return QColor(colour).name()


@pytest.mark.parametrize(("width", "height"), [(1024, 700), (1440, 900)])
def test_every_plot_title_fits_its_plot_whole(main_window, tmp_path, width, height):
    """At 1024 px the live plots are ~130 px wide: "Loss vs wall-clock time" was cut to "Loss vs wall-clock ti"."""
    w = main_window
    w.resize(width, height)
    assert w.open_file(write_run_file(tmp_path / "t.h5", batch_sizes=(8, 16, 32)))
    w.live.set_loss_x("wall_time")
    seen = 0
    for tab, plots in ((0, w.live.plots), (1, w.summary.plots)):
        w.views.setCurrentIndex(tab)
        w.refresh(full=True)
        QApplication.processEvents()
        for name, plot in plots.items():
            label = plot.getPlotItem().titleLabel
            shown = label.item.toPlainText()
            assert shown == label.text, (name, shown)  # whole, not elided
            assert label.item.document().idealWidth() <= label.rect().width() + 0.5, name
            left = label.mapToScene(label.item.pos()).x()
            assert 0 <= left and left + label.item.document().idealWidth() <= plot.viewport().width() + 0.5, name
            seen += 1
    assert seen == 10


def test_a_title_too_long_for_its_plot_is_elided_with_the_whole_title_as_tooltip(qapp, light_afterwards):
    from batchlab.gui.plot_axes import make_plot
    from batchlab.gui.plot_style import apply_plot_colours, set_plot_colours

    title = "Loss vs wall-clock time since the start of the run"
    plot = make_plot(title, "time", "s", "loss", None)
    plot.resize(170, 150)
    plot.show()
    QApplication.processEvents()
    label = plot.getPlotItem().titleLabel
    shown = label.item.toPlainText()
    assert shown.endswith("\u2026") and title.startswith(shown[:-1].rstrip()) and len(shown) < len(title) // 2
    assert label.item.document().idealWidth() <= label.rect().width() + 0.5
    assert label.toolTip() == title and label.text == title  # exports and the theme switch use the whole title
    set_plot_colours("#1F2023", "#D4D7DC", "#A0A4AA")  # a theme switch re-sets the title's text
    apply_plot_colours(plot)
    assert label.item.toPlainText() == shown and "#d4d7dc" in label.item.toHtml().lower()
    plot.resize(1000, 300)  # room again: whole, no tooltip
    QApplication.processEvents()
    assert label.item.toPlainText() == title and label.toolTip() == ""
    set_plot_colours("#FFFFFF", "#000000", "#555555")
    plot.close()


@pytest.mark.parametrize(("width", "height"), [(1024, 700), (1440, 900)])
def test_every_axis_label_fits_along_its_axis(main_window, tmp_path, width, height):
    """Seen cut: "process RSS peak (MiB" at full size, "mean epoch time (s" and "dy throughput (ksam" at 1024x700."""
    w = main_window
    w.resize(width, height)
    assert w.open_file(write_run_file(tmp_path / "t.h5", batch_sizes=(8, 16, 32)))
    cut = []
    for tab, plots in ((0, w.live.plots), (1, w.summary.plots), (2, w.analysis.plots)):
        w.views.setCurrentIndex(tab)
        w.refresh(full=True)
        QApplication.processEvents()
        for name, plot in plots.items():
            for side, length in (("left", "height"), ("bottom", "width")):
                axis = plot.getPlotItem().getAxis(side)
                if not axis.isVisible() or not axis.label.isVisible() or not axis.labelText:
                    continue
                text = axis.label.boundingRect().width()
                room = getattr(axis.geometry(), length)()
                if text > room + 0.5:
                    cut.append(f"{tab}/{name}/{side}: {axis.label.toPlainText()!r} {text:.0f} px > {room:.0f} px")
    assert cut == []


def test_the_setup_combos_show_their_choice_whole(main_window):
    """The Target combo read "none: train the w" in a full-size window."""
    from PySide6.QtWidgets import QComboBox, QStyle, QStyleOptionComboBox

    w = main_window
    w.setup.convergence.set_expanded(True)
    w.setup.execution.set_expanded(True)
    QApplication.processEvents()
    cut = []
    for combo in w.setup.widget().findChildren(QComboBox):
        if not combo.isVisible():
            continue
        option = QStyleOptionComboBox()
        combo.initStyleOption(option)
        room = combo.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxEditField, combo
        )
        if combo.fontMetrics().horizontalAdvance(combo.currentText()) > room.width():
            cut.append(f"{combo.objectName()}: {combo.currentText()!r}")
    assert cut == []
