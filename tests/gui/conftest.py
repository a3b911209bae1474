"""GUI test fixtures: offscreen Qt, settings in a temp folder, a window that is always cleaned up."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

pytest.importorskip("pytestqt")

from PySide6.QtCore import QSettings, QStandardPaths  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402

# Tiny real sweep: MLP on 256 bundled samples, one epoch per run on the CPU.
TINY = {
    "preset": "mnist-mlp",
    "samples": "256",
    "val_samples": "64",
    "epochs": "1",
    "batch_sizes": "64, 128",
    "device": "cpu",
}


@pytest.fixture(autouse=True, scope="session")
def _private_settings(tmp_path_factory):
    """Nothing in the GUI tests may read or write the user's real settings."""
    QStandardPaths.setTestModeEnabled(True)
    folder = tmp_path_factory.mktemp("qsettings")
    for scope in (QSettings.Scope.UserScope, QSettings.Scope.SystemScope):
        QSettings.setPath(QSettings.Format.IniFormat, scope, str(folder))
        QSettings.setPath(QSettings.Format.NativeFormat, scope, str(folder))
    yield folder


@pytest.fixture(autouse=True)
def _private_run_folder(tmp_path, monkeypatch):
    """The window's default run folder is the user's documents: a test's sweeps go to its own folder."""
    from batchlab.gui import run_folder

    monkeypatch.setattr(run_folder, "default_output_dir", lambda: str(tmp_path / "runs"))


@pytest.fixture
def settings(tmp_path):
    return QSettings(str(tmp_path / "batchlab-test.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def main_window(qtbot, settings, tmp_path, monkeypatch):
    """The main window with private settings; any sweep still running at the end is stopped and awaited."""
    from batchlab.gui.main_window import MainWindow

    monkeypatch.chdir(tmp_path)
    window = MainWindow(settings)
    # Tests open files and check what is shown right after: the same read, on the GUI thread. The threaded
    # read (what a user gets) is tested in tests/gui/test_threaded_open.py.
    window.read_in_thread = False
    qtbot.addWidget(window)
    # A desktop-sized window (the offscreen screen is 800x600, which the window now fits as well);
    # layout tests resize it themselves.
    window.resize(1440, 900)
    window.show()
    qtbot.waitExposed(window)
    yield window
    if window.running:
        window.worker.stop()
        window.worker.wait(120_000)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    window.close()


def set_fields(window, values: dict) -> None:
    """Type values into the setup panel as a user would (then it validates)."""
    window.setup.set_values(values)


def run_file_path(tmp_path, name: str = "sweep.h5") -> str:
    return str(tmp_path / name)


def wait_until(predicate, timeout_s: float, step_ms: int = 20) -> None:
    """Run the Qt event loop until predicate() is true; fail after timeout_s seconds."""
    import time

    from PySide6.QtTest import QTest

    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        QTest.qWait(step_ms)


@pytest.fixture(scope="session")
def tiny_sweep(qapp, tmp_path_factory):
    """One tiny REAL sweep run from the window (TensorFlow in child processes), observed as it ends.

    Session-scoped because each run starts TensorFlow in a fresh child (seconds on a small machine);
    tests assert on what was observed and reuse the finished run file.
    """
    from batchlab.gui.main_window import MainWindow

    folder = tmp_path_factory.mktemp("tiny_sweep")
    window = MainWindow(QSettings(str(folder / "settings.ini"), QSettings.Format.IniFormat))
    window.resize(1440, 900)  # wide enough that the runs table's columns do not fill it by themselves
    window.show()
    out = str(folder / "tiny.h5")
    window.setup.set_values(TINY)
    window.setup.out.setText(out)
    seen = {"batches": [], "tf_in_gui": None}
    window.actions["run"].trigger()
    assert window.running, window.setup.errors
    import gc

    seen["frozen_during"] = gc.get_freeze_count()
    window.worker.events.connect(lambda batch: seen["batches"].append(len(batch)))
    wait_until(lambda: not window.running, timeout_s=240)
    wait_until(lambda: window.worker.isFinished(), timeout_s=10)
    seen["frozen_after"] = gc.get_freeze_count()
    window.refresh(full=True)
    import sys

    seen["tf_in_gui"] = "tensorflow" in sys.modules
    yield window, out, seen
    window.close()
