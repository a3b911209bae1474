"""`batchlab` with no subcommand: open the window (or say how to run headless without a display)."""

from __future__ import annotations

import os
import sys

HEADLESS_HINT = (
    "batchlab: no display found, so the window cannot open; run a sweep headless with "
    "`batchlab sweep --preset mnist-autoencoder` (or set QT_QPA_PLATFORM=offscreen)"
)
EXIT_NO_DISPLAY = 2  # also: the Qt binding cannot run the window
ORGANIZATION = "BatchLab"
APPLICATION = "BatchLab"
NON_DISPLAY_PLATFORMS = ("offscreen", "minimal", "vnc", "eglfs", "linuxfb")


def has_display(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> bool:
    """True where Qt can show a window: any non-Linux desktop, an X11/Wayland session, or a non-display platform."""
    env = os.environ if environ is None else environ
    if not sys.platform.startswith("linux"):
        return True
    platform = env.get("QT_QPA_PLATFORM", "")
    if argv and "-platform" in argv:
        platform = argv[argv.index("-platform") + 1] if argv.index("-platform") + 1 < len(argv) else platform
    if platform.split(":")[0] in NON_DISPLAY_PLATFORMS:
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def broken_binding_message() -> str | None:
    """Why the installed PySide6 cannot run the window, or None.

    PySide6 6.12.0 on Python < 3.12 drops a reference to True on every signal emit from Python;
    the window then dies within seconds with "Fatal Python error: bool_dealloc". We measure that
    directly instead of trusting version numbers.
    """
    if sys.version_info >= (3, 12):
        return None
    import PySide6
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        fired = Signal()

    probe = _Probe()
    before = sys.getrefcount(True)
    for _ in range(8):
        probe.fired.emit()
    if sys.getrefcount(True) > before - 4:
        return None
    return (
        f"batchlab: PySide6 {PySide6.__version__} loses references on every Qt signal under Python "
        f"{sys.version_info.major}.{sys.version_info.minor} and would crash; install another version, e.g. "
        "pip install 'PySide6-Essentials<6.12'"
    )


def run_app(argv: list[str] | None = None) -> int:
    """Open the main window; a run file given as the only argument is opened in it. Returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not has_display(argv):
        print(HEADLESS_HINT, file=sys.stderr)
        return EXIT_NO_DISPLAY
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    problem = broken_binding_message()
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_NO_DISPLAY

    from batchlab.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(["batchlab", *argv])
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    window = MainWindow(QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORGANIZATION, APPLICATION))
    window.show()
    files = [a for a in app.arguments()[1:] if a.lower().endswith((".h5", ".hdf5"))]
    if files:
        QTimer.singleShot(0, lambda: window.open_file(files[0]))
    # The device list needs TensorFlow, so a child process answers it after the window is up.
    QTimer.singleShot(0, window.start_device_probe)
    return app.exec()
