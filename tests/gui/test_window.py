"""The window opens fast and without TensorFlow; the setup panel refuses what the CLI refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from batchlab.core.errors import SpecError
from batchlab.core.presets import PRESETS
from batchlab.core.spec import build_spec
from batchlab.gui.app import HEADLESS_HINT, broken_binding_message, run_app
from PySide6.QtCore import QSettings

ROOT = Path(__file__).resolve().parents[2]


def test_window_opens_without_importing_tensorflow():
    """Build and paint the real window (and Help > About, which lists devices) in a fresh interpreter;
    TensorFlow and Keras must stay out of it."""
    code = (
        "import sys\n"
        "from PySide6.QtWidgets import QApplication\n"
        "from PySide6.QtCore import QSettings\n"
        "app = QApplication([])\n"
        "from batchlab.gui.main_window import MainWindow\n"
        "import batchlab.gui.worker, batchlab.core.sweep.runner, batchlab.core.runfile.reader\n"
        "w = MainWindow(QSettings(sys.argv[1], QSettings.Format.IniFormat))\n"
        "w.show(); w.show_about(); w.show_runfile_format(); app.processEvents()\n"
        "print(w.isVisible(), 'tensorflow' in sys.modules, 'keras' in sys.modules)\n"
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}
    ini = str(Path(os.environ.get("TMPDIR", "/tmp")) / f"batchlab-test-{os.getpid()}.ini")
    out = subprocess.run([sys.executable, "-c", code, ini], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["True", "False", "False"]


def test_no_display_says_how_to_run_headless(monkeypatch, capsys):
    monkeypatch.setattr(sys, "platform", "linux")
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    assert run_app([]) == 2
    err = capsys.readouterr().err.strip()
    assert err == HEADLESS_HINT and "\n" not in err
    assert "batchlab sweep --preset mnist-autoencoder" in err


def test_installed_qt_binding_keeps_reference_counts():
    """PySide6 6.12.0 on Python 3.11 corrupts refcounts on every emit; the window refuses to start on it."""
    assert broken_binding_message() is None


def test_window_opens_with_run_disabled_until_valid(main_window):
    w = main_window
    assert w.isVisible() and w.windowTitle().startswith("BatchLab")
    assert w.setup.valid, w.setup.errors
    assert w.actions["run"].isEnabled() and not w.actions["stop"].isEnabled()
    assert w.actions["run"].shortcuts()[0].toString() == "Ctrl+R"
    assert {s.toString() for s in w.actions["stop"].shortcuts()} == {"Ctrl+.", "Esc"}
    assert w.actions["open"].shortcuts()[0].toString() == "Ctrl+O"


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("batch_sizes", "8, abc"),
        ("batch_sizes", "0, 16"),
        ("batch_sizes", "16, 16"),
        ("batch_sizes", "99999"),  # larger than the samples: a cross-field rule
        ("samples", "-3"),
        ("epochs", "1.5"),
        ("lr", "-0.1"),
        ("momentum", "2"),
        ("seeds", "x"),
        ("model_file", "net.h5"),
    ],
)
def test_invalid_value_is_refused_with_the_cli_message(main_window, field, text):
    w = main_window
    w.setup.set_values({field: text, **({"optimizer": "sgd"} if field == "momentum" else {})})
    with pytest.raises(SpecError) as raised:
        build_spec(w.setup.values())
    assert raised.value.field == field
    label = w.setup._error_labels[field]
    assert label.isVisible() and label.text() == raised.value.message
    assert not w.actions["run"].isEnabled()
    assert w.start_sweep() is False and not w.running
    w.setup.apply_preset(w.setup.values()["preset"])
    assert w.setup.valid and w.actions["run"].isEnabled() and not label.isVisible()


def test_output_file_is_checked_like_the_run_file_writer(main_window, tmp_path):
    w = main_window
    w.setup.out.setText(str(tmp_path / "sweep.txt"))
    assert "does not end in .h5 or .hdf5" in w.setup.errors["out"]
    assert not w.actions["run"].isEnabled()
    w.setup.out.setText(str(tmp_path / "a" / "b" / "sweep.h5"))
    assert "does not exist" in w.setup.errors["out"]
    w.setup.out.setText(str(tmp_path / "new-folder" / "sweep.h5"))  # one missing level is created at Run
    assert w.setup.valid


def test_choosing_a_preset_fills_its_defaults(main_window):
    w = main_window
    for name, preset in PRESETS.items():
        index = w.setup.preset.findData(name)
        w.setup.preset.setCurrentIndex(index)
        w.setup.preset.activated.emit(index)
        values = w.setup.values()
        if name != "keras-file":
            assert build_spec(values) == build_spec({"preset": name})
        assert values["batch_sizes"] == ", ".join(str(b) for b in preset.defaults["batch_sizes"])
        assert w.setup.preset_description.text() == preset.description
    # keras-file needs a model file, so Run waits for one, with the CLI's message beside the field
    index = w.setup.preset.findData("keras-file")
    w.setup.preset.setCurrentIndex(index)
    w.setup.preset.activated.emit(index)
    assert w.setup.errors["model_file"] == "the keras-file workload needs a .keras model file"


def test_powers_of_two_helper(main_window):
    w = main_window
    w.setup.pow2_from.setCurrentText("4")
    w.setup.pow2_to.setCurrentText("64")
    w.setup.fill_powers_of_two()
    assert w.setup.batch_sizes.text() == "4, 8, 16, 32, 64"
    assert build_spec(w.setup.values()).batch_sizes == (4, 8, 16, 32, 64)


def test_devices_from_the_child_fill_the_device_list(main_window):
    w = main_window
    w._on_environment(
        {"devices": [{"name": "cpu", "kind": "CPU", "description": "x86", "memory_bytes": 8 << 30},
                     {"name": "gpu:0", "kind": "GPU", "description": "H200", "memory_bytes": 141 << 30}]}
    )  # fmt: skip
    items = [w.setup.device.itemData(i) for i in range(w.setup.device.count())]
    assert items == ["auto", "cpu", "gpu:0"]
    w.setup.set_values({"device": "gpu:0"})
    assert build_spec(w.setup.values()).device == "gpu:0"


def test_settings_keep_geometry_splitters_and_last_spec(qtbot, tmp_path, monkeypatch):
    from batchlab.gui.main_window import MainWindow

    monkeypatch.chdir(tmp_path)
    path = str(tmp_path / "settings.ini")
    first = MainWindow(QSettings(path, QSettings.Format.IniFormat))
    qtbot.addWidget(first)
    first.show()
    first.setup.set_values({"preset": "mnist-cnn", "batch_sizes": "32, 96", "epochs": "2"})
    first.resize(760, 560)  # fits the offscreen platform's screen, so restoring it is not clamped
    first.splitter.setSizes([340, 400])
    sizes = first.splitter.sizes()
    first.close()
    saved = QSettings(path, QSettings.Format.IniFormat)
    assert json.loads(saved.value("setup/last_spec"))["batch_sizes"] == "32, 96"
    second = MainWindow(QSettings(path, QSettings.Format.IniFormat))
    qtbot.addWidget(second)
    second.show()
    assert second.setup.values()["batch_sizes"] == "32, 96"
    assert second.setup.values()["preset"] == "mnist-cnn"
    assert second.size() == first.size()
    assert second.splitter.sizes() == sizes
    second.close()


def test_device_probe_fills_the_device_list_from_a_child_process(main_window):
    """The real probe: a child imports TensorFlow and reports its devices; the window stays TF-free."""
    from tests.gui.conftest import wait_until

    w = main_window
    w.start_device_probe()
    wait_until(lambda: w.setup.device.findData("cpu") >= 0 and "—" in w.setup.device.itemText(1), timeout_s=120)
    assert w.setup.device.itemData(0) == "auto"
    assert "logical cores" in w.setup.device.itemText(w.setup.device.findData("cpu"))


def test_run_files_default_to_the_users_documents_not_the_start_folder(monkeypatch, tmp_path):
    # From a clone, `./runs` put the user's run files inside the repository
    from batchlab.core.paths import run_file_problem
    from batchlab.gui import run_folder
    from PySide6.QtCore import QStandardPaths

    monkeypatch.undo()  # the real default, not the tests' private folder
    documents = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    folder = Path(run_folder.default_output_dir())
    assert folder.name == "BatchLab runs" and not str(folder).startswith(str(Path.cwd()))
    # the documents folder where the desktop has one, else the home folder; either way the Run button works:
    # the one missing level is created when the sweep starts (~/Documents/BatchLab runs was refused here)
    assert folder.parent == (Path(documents) if Path(documents).is_dir() else Path.home())
    assert run_file_problem(folder / "sweep.h5", create_folder=True) is None


def test_the_window_shows_the_default_run_folder_and_remembers_the_last_one(qtbot, tmp_path):
    from batchlab.gui import run_folder
    from batchlab.gui.main_window import MainWindow

    path = str(tmp_path / "w.ini")
    first = MainWindow(QSettings(path, QSettings.Format.IniFormat))
    qtbot.addWidget(first)
    assert Path(first.setup.output_path()).parent == Path(run_folder.default_output_dir())
    chosen = tmp_path / "elsewhere" / "mine.h5"
    first.setup.out.setText(str(chosen))
    first.close()
    second = MainWindow(QSettings(path, QSettings.Format.IniFormat))
    qtbot.addWidget(second)
    assert Path(second.setup.output_dir) == chosen.parent
    second.close()
