"""Render each main view of a finished sweep to PNG, for the README and for reviewing the window.

    .venv/bin/python scripts/screenshots.py                      # runs a small real sweep first (~1-2 min, CPU)
    .venv/bin/python scripts/screenshots.py --run-file runs/x.h5 # or shows an existing run file

Writes main_window.png, summary.png, live_plots.png, runs_table.png and setup_panel.png into
docs/screenshots/ (or --out). Uses the offscreen Qt platform unless a display is set, and
private settings in a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = {  # a small sweep that still shows the batch-size trade-offs
    "preset": "mnist-autoencoder",
    "samples": 2048,
    "val_samples": 256,
    "epochs": 3,
    "batch_sizes": "16, 32, 64, 128, 256",
    "device": "cpu",
}


def run_small_sweep(folder: Path) -> Path:
    from batchlab.core.spec import build_spec
    from batchlab.core.sweep.runner import run_sweep

    out = folder / "screenshot-sweep.h5"
    print(f"running a small sweep into {out} ...", file=sys.stderr)
    status = run_sweep(build_spec(SWEEP), out)
    print(f"sweep {status}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-file", help="an existing run file to show (default: run a small sweep)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"), help="folder for the PNG files")
    parser.add_argument("--size", default="1440x900", help="window size in pixels, WIDTHxHEIGHT")
    args = parser.parse_args(argv)
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(ROOT))
    width, height = (int(v) for v in args.size.lower().split("x"))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="batchlab-shots-") as tmp:
        run_file = Path(args.run_file) if args.run_file else run_small_sweep(Path(tmp))
        from batchlab.gui.main_window import MainWindow
        from PySide6.QtCore import QSettings, Qt
        from PySide6.QtGui import QImage
        from PySide6.QtTest import QTest
        from PySide6.QtWidgets import QApplication

        app = QApplication.instance() or QApplication(["batchlab-screenshots"])
        window = MainWindow(QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat))
        window.show()
        window.resize(width, height)
        window.splitter.setSizes([380, width - 380])
        window.right_splitter.setSizes([int(height * 0.68), int(height * 0.22)])
        if not window.open_file(str(run_file)):
            print(f"cannot open {run_file}", file=sys.stderr)
            return 1
        window.use_file_settings()
        window.setup.out.setText("runs/my-sweep.h5")
        window.table.select_keys(set())
        window.status_label.setText(f"Opened {run_file.name}: {window.data.status}, {len(window.data.runs)} runs")
        shots = {}

        def settle() -> None:
            for _ in range(5):
                app.processEvents()
                QTest.qWait(60)

        window.views.setCurrentIndex(0)
        settle()
        shots["main_window.png"] = window.grab()
        shots["live_plots.png"] = window.live.grab()
        shots["runs_table.png"] = window.bottom.grab()
        shots["setup_panel.png"] = window.setup.grab()
        window.views.setCurrentIndex(1)
        settle()
        shots["summary.png"] = window.grab()
        for name, pixmap in shots.items():
            path = out_dir / name
            # 256 colours keep the PNGs small enough for the repository; plots use few colours anyway.
            dither = Qt.ImageConversionFlag.ThresholdDither
            image = pixmap.toImage().convertToFormat(QImage.Format.Format_Indexed8, dither)
            image.save(str(path), "PNG", 9)
            print(f"{path} ({image.width()}x{image.height()}, {path.stat().st_size // 1024} KiB)")
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
