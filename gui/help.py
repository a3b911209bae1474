"""The Help menu's dialogs: About (versions, devices), the run-file format and the keyboard shortcuts.

Never imports TensorFlow: devices are those the training process reported, else what NVML says
about NVIDIA GPUs, else "detected when a run starts".
"""

from __future__ import annotations

import html
import platform
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, qVersion
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

if TYPE_CHECKING:
    from batchlab.gui.actions import WindowActions

RUNFILE_DOC = Path(__file__).resolve().parents[1] / "docs" / "runfile-format.md"  # a checkout, or the wheel's copy
DEVICES_LATER = "detected when a run starts (the training process lists what TensorFlow sees)"
FORMAT_SUMMARY = """# The run file (HDF5)

This copy of BatchLab does not include the full description (docs/runfile-format.md).

- One HDF5 file per sweep, written by one writer while the sweep runs; it can be opened while it grows.
- Root attributes: `format`, `format_version`, `status` (running, complete, stopped, failed) and `spec`
  (the sweep's settings as JSON).
- One group per run under `runs/`, with attributes (batch size, seed, status, figures) and tables of
  per-step and per-epoch measurements, each dataset with `units` and `long_name` attributes.
- Look inside with `h5dump -A file.h5`, or `batchlab report file.h5`.
"""


def versions() -> dict[str, str]:
    """Version of BatchLab and of what the window runs on (no TensorFlow: the window never imports it)."""
    import h5py
    import numpy
    import pyqtgraph
    import PySide6
    from batchlab.core import __version__

    return {
        "BatchLab": __version__,
        "Python": platform.python_version(),
        "Qt": qVersion(),
        "PySide6": PySide6.__version__,
        "pyqtgraph": pyqtgraph.__version__,
        "h5py": h5py.__version__,
        "HDF5": h5py.version.hdf5_version,
        "NumPy": numpy.__version__,
    }


def nvml_gpus() -> list[str]:
    """NVIDIA GPUs as NVML lists them ("name, N GiB"); empty without NVML or a driver."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...: simply no NVIDIA GPU
        return []
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            gib = pynvml.nvmlDeviceGetMemoryInfo(handle).total / (1 << 30)
            out.append(f"{name}, {gib:.0f} GiB")
        return out
    except Exception:  # noqa: BLE001 - a half-working driver: say what was found so far
        return []
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def device_lines(reported: list[dict]) -> list[str]:
    """What the About box says about devices: reported by the training process, else NVML, else later."""
    if reported:
        lines = []
        for d in reported:
            gib = float(d.get("memory_bytes", -1) or -1) / (1 << 30)
            memory = f", {gib:.0f} GiB" if gib > 0 else ""
            lines.append(f"{d.get('name', '?')}: {d.get('description', '') or d.get('kind', '')}{memory}")
        return lines
    gpus = nvml_gpus()
    if gpus:
        seen = "seen by NVML; TensorFlow lists its devices when a run starts"
        return [f"gpu:{i}: {g} ({seen})" for i, g in enumerate(gpus)]
    return [DEVICES_LATER]


TRAINING_VERSIONS = (("TensorFlow", "tensorflow_version"), ("Keras", "keras_version"), ("CUDA", "cuda_version"))
TRAINING_LATER = "asked of a training process when the window opens (the window never imports TensorFlow)"


def training_versions(environment: dict | None) -> dict[str, str]:
    """TensorFlow, Keras and CUDA as the training process reported them (the probe, or a run's environment);
    until one has, each says where it will come from. CUDA is left out when TensorFlow was built without it."""
    environment = environment or {}
    out = {}
    for label, key in TRAINING_VERSIONS:
        value = environment.get(key)
        if value:
            out[label] = str(value)
        elif not environment:
            out[label] = TRAINING_LATER
    return out


def about_html(reported_devices: list[dict], environment: dict | None = None) -> str:
    table = {**versions(), **training_versions(environment)}
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in table.items())
    devices = "".join(f"<li>{html.escape(line)}</li>" for line in device_lines(reported_devices))
    return (
        "<h3>BatchLab</h3><p>Measures how the mini-batch size changes training time, memory and convergence.</p>"
        f"<table cellspacing='4'>{rows}</table><p><b>Devices</b></p><ul>{devices}</ul>"
    )


def runfile_format_markdown() -> tuple[str, str]:
    """(markdown, where it came from): docs/runfile-format.md if it is there, else a short summary."""
    try:
        return RUNFILE_DOC.read_text(encoding="utf-8"), str(RUNFILE_DOC)
    except OSError:
        return FORMAT_SUMMARY, "built-in summary"


KEY_NAMES = {"Ctrl+.": "Ctrl+. (full stop)"}  # "Stop  Ctrl+., Esc" read as one puzzling key


def shortcut_rows(actions: WindowActions) -> list[tuple[str, list[str]]]:
    """(what, its keys) for every action with a keyboard shortcut, in menu order."""
    rows = []
    for action in actions.values():
        keys = [KEY_NAMES.get(s.toString(), s.toString()) for s in action.shortcuts()]
        if keys:
            rows.append((action.text().replace("&", "").rstrip("…"), keys))
    return rows


def text_dialog(parent: QWidget, title: str, *, markdown: str = "", html_text: str = "") -> QDialog:
    """A resizable, non-modal dialog showing rich text, with a Close button; shown at once."""
    dialog = QDialog(parent)
    dialog.setWindowTitle(title)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    layout = QVBoxLayout(dialog)
    browser = QTextBrowser()
    browser.setObjectName("help_text")
    browser.setOpenExternalLinks(True)
    if markdown:
        browser.setMarkdown(markdown)
    else:
        browser.setHtml(html_text)
    layout.addWidget(browser)
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    buttons.rejected.connect(dialog.reject)
    layout.addWidget(buttons)
    screen = parent.screen().availableGeometry() if parent is not None else None
    width, height = (720, 560) if markdown else (460, 420)
    if screen is not None:
        width, height = min(width, int(screen.width() * 0.9)), min(height, int(screen.height() * 0.9))
    dialog.resize(width, height)
    dialog.open()
    return dialog


def show_about(parent: QWidget, reported_devices: list[dict], environment: dict | None = None) -> QDialog:
    return text_dialog(parent, "About BatchLab", html_text=about_html(reported_devices, environment))


def show_runfile_format(parent: QWidget) -> QDialog:
    markdown, source = runfile_format_markdown()
    return text_dialog(parent, f"The run file format ({Path(source).name})", markdown=markdown)


def show_shortcuts(parent: QWidget, actions: WindowActions) -> QDialog:
    rows = "".join(
        f"<tr><td>{html.escape(what)}</td><td>{' or '.join(f'<b>{html.escape(k)}</b>' for k in keys)}</td></tr>"
        for what, keys in shortcut_rows(actions)
    )
    return text_dialog(parent, "Keyboard shortcuts", html_text=f"<table cellspacing='6'>{rows}</table>")
