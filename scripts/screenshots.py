"""Render the window during and after a real sweep, in the light and the dark theme, for the README and docs.

    .venv/bin/python scripts/screenshots.py                       # real sweeps on the CPU (~2 min)
    .venv/bin/python scripts/screenshots.py --run-file runs/x.h5  # only the "after" shots, of an existing file
    DISPLAY=:92 .venv/bin/python scripts/screenshots.py           # under Xvfb with a window manager

Runs a small sweep from the window itself (TensorFlow in the child process, as a user would) and
grabs it mid-sweep, then after it ends; then runs a 1-epoch variant (another learning rate) and shows it as a comparison
(the banner listing the differing settings). Writes into docs/screenshots/ (or --out):

    mid_sweep-light.png  mid_sweep-dark.png      the Live tab while the sweep runs
    main_window-light.png  main_window-dark.png  the Live tab after the sweep
    summary-light.png  summary-dark.png          the Summary tab
    compare-light.png  compare-dark.png          compared with a 1-epoch sweep: the banner
    convergence_setup.png                        the Convergence section and its learning-rate preview (golmant-lsr)
    range_test.png                               a range test run from the window (lr-find, 3 batch sizes)
    main_window.png, live_plots.png, runs_table.png, setup_panel.png, summary.png   (light; the README's)
    walkthrough_live.png                         mid-sweep, light: the running epoch in every epoch plot
    walkthrough_examples_log.png                 after the sweep: loss against examples seen, log x
    walkthrough_targets.png  walkthrough_seeds.png   a train-to-target sweep with two seeds (run headless
                                                 with `batchlab sweep`, then opened): evaluation points and
                                                 target lines on the Live tab; the Summary's min-max bands
    analysis.png                                 with --analysis-file FILE: the Analysis tab on that file
                                                 (--only-analysis: this shot alone, a few seconds)

Uses the offscreen Qt platform unless a display is set, and private settings in a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
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
COMPARE = {**SWEEP, "epochs": 1, "batch_sizes": "32, 128", "lr": 0.002}  # 1 epoch, another learning rate
RANGE_TEST = {"preset": "mnist-mlp", "samples": 512, "val_samples": 64, "batch_sizes": "16, 64, 256", "device": "cpu"}
RANGE = {"lr_min": "1e-4", "lr_max": "10", "lr_steps": "80"}
# Train to target with two seeds per batch size (`batchlab sweep` options; --keep-training so the curves go on
# past the target line)
TARGETS = (
    "--preset mnist-mlp --samples 2048 --val-samples 512 --epochs 3 --batch-sizes 16,64,256 --seeds 0,1 "
    "--target val_accuracy=0.85 --eval-every 20 --keep-training --device cpu --quiet"
).split()
THEMES = ("light", "dark")
SWEEP_TIMEOUT_S = 600


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-file", help="an existing run file to show (no sweep is run; no mid-sweep shots)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"), help="folder for the PNG files")
    parser.add_argument("--size", default="1440x900", help="window size in pixels, WIDTHxHEIGHT")
    parser.add_argument("--no-compare", action="store_true", help="skip the comparison sweep and its shots")
    parser.add_argument(
        "--only-convergence", action="store_true", help="only the Convergence section and the range test (~1 min)"
    )
    parser.add_argument(
        "--targets-file", help="an existing train-to-target run file for the walkthrough_targets/seeds shots"
    )
    parser.add_argument("--no-targets", action="store_true", help="skip the train-to-target sweep and its shots")
    parser.add_argument(
        "--analysis-file",
        help="a train-to-target run file for analysis.png, the Analysis tab (docs/analysis.md's example sweep); "
        "without it there is no analysis.png",
    )
    parser.add_argument("--only-analysis", action="store_true", help="only analysis.png (with --analysis-file)")
    args = parser.parse_args(argv)
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(ROOT))
    width, height = (int(v) for v in args.size.lower().split("x"))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    from batchlab.gui.main_window import MainWindow
    from PySide6.QtCore import QSettings, Qt
    from PySide6.QtGui import QImage
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(["batchlab-screenshots"])

    def settle(rounds: int = 6) -> None:
        for _ in range(rounds):
            app.processEvents()
            QTest.qWait(60)

    magick = shutil.which("magick") or shutil.which("convert")

    def save(pixmap, name: str) -> None:
        path = out_dir / name
        image = pixmap.toImage()
        image.save(str(path), "PNG", 9)
        # 256 colours keep the PNGs small enough for the repository. ImageMagick picks the 256 from
        # the image; Qt's own conversion uses a fixed colour cube that merges the dark theme's greys.
        if magick is not None:
            subprocess.run([magick, str(path), "+dither", "-colors", "256", f"PNG8:{path}"], check=True)
        else:
            image.convertToFormat(QImage.Format.Format_Indexed8, Qt.ImageConversionFlag.ThresholdDither).save(
                str(path), "PNG", 9
            )
        print(f"{path} ({image.width()}x{image.height()}, {path.stat().st_size // 1024} KiB)")

    def in_each_theme(window, name: str, tab: int = 0) -> None:
        window.views.setCurrentIndex(tab)
        for theme in THEMES:
            window.apply_theme(theme)
            window.refresh(full=True)
            settle()
            save(window.grab(), f"{name}-{theme}.png")
        window.apply_theme("light")

    def run_from_window(window, values: dict, out: Path, on_half_way=None, on_poll=None) -> bool:
        window.setup.set_values(values)
        window.setup.out.setText(str(out))
        if not window.start_sweep():
            print(f"the sweep did not start: {window.setup.errors}", file=sys.stderr)
            return False
        deadline = time.monotonic() + SWEEP_TIMEOUT_S
        half_way_done = on_half_way is None
        while window.running and time.monotonic() < deadline:
            QTest.qWait(100)
            if on_poll is not None:
                on_poll()
            p = window.progress
            # mid-sweep: a few runs done and the next one has drawn some epochs
            running_epoch = p.current.get("epoch", 0) if p is not None and p.current else 0
            if not half_way_done and p.done_runs >= 2 and running_epoch >= 1:
                settle(3)
                on_half_way()
                half_way_done = True
        if window.running:
            print("the sweep did not end in time", file=sys.stderr)
            window.stop_sweep()
            while window.running:
                QTest.qWait(100)
            return False
        settle()
        return True

    def convergence_shots(window, tmp: str) -> None:
        """The Convergence section with golmant-lsr's LSR warmup on log axes, then a real range test."""
        window.setup.set_values({"preset": "golmant-lsr"})
        window.setup.convergence.set_expanded(True)
        window.setup.preview.log_x.setChecked(True)
        settle()
        window.setup.preview.update_now()
        settle()
        save(window.setup.convergence.grab(), "convergence_setup.png")
        window.setup.set_values(RANGE_TEST)
        window.setup.out.setText(str(Path(tmp) / "sweep.h5"))
        dialog = window.setup.open_range_test()
        for name, text in RANGE.items():
            dialog.fields[name].setText(text)
        print("running a range test from the window ...", file=sys.stderr)
        dialog.start()
        deadline = time.monotonic() + SWEEP_TIMEOUT_S
        while dialog.running and time.monotonic() < deadline:
            QTest.qWait(100)
        settle()
        save(dialog.grab(), "range_test.png")
        dialog.close()

    with tempfile.TemporaryDirectory(prefix="batchlab-shots-") as tmp:
        window = MainWindow(QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat))
        window.read_in_thread = False  # each shot is taken right after its file is opened
        window.show()
        window.resize(width, height)
        window.right_splitter.setSizes([int(height * 0.68), int(height * 0.22)])
        settle()
        if args.analysis_file:
            window.open_file(args.analysis_file)
            window.views.setCurrentWidget(window.analysis)
            settle()
            save(window.analysis.grab(), "analysis.png")
            if args.only_analysis:
                window.close()
                return 0
        if args.only_convergence:
            convergence_shots(window, tmp)
            window.close()
            return 0
        if args.run_file:
            run_file = Path(args.run_file)
            if not window.open_file(str(run_file)):
                print(f"cannot open {run_file}", file=sys.stderr)
                return 1
            window.use_file_settings()
        else:
            run_file = Path(tmp) / "batch-sweep.h5"
            print(f"running a small sweep from the window into {run_file} ...", file=sys.stderr)

            taken = []

            def running_epoch_shot() -> None:
                """walkthrough_live.png: the first moment a later run is inside its second or third epoch
                and the plots show its running epoch (checked on the plots themselves, then grabbed)."""
                p = window.progress
                if taken or p is None or p.done_runs < 2 or not p.current or p.current.get("epoch", 0) < 1:
                    return
                window.refresh(full=True)
                app.processEvents()
                if window.live.bars.running:
                    save(window.grab(), "walkthrough_live.png")
                    taken.append(True)

            ok = run_from_window(
                window,
                SWEEP,
                run_file,
                on_half_way=lambda: in_each_theme(window, "mid_sweep"),
                on_poll=running_epoch_shot,
            )
            if not ok:
                return 1
            window.open_file(str(run_file))
        window.setup.out.setText("runs/my-sweep.h5")
        window.table.select_keys(set())
        window.status_label.setText(f"Opened {run_file.name}: {window.data.status}, {len(window.data.runs)} runs")
        settle()
        in_each_theme(window, "main_window", tab=0)
        in_each_theme(window, "summary", tab=1)
        window.views.setCurrentIndex(0)
        settle()
        save(window.grab(), "main_window.png")
        save(window.live.grab(), "live_plots.png")
        save(window.bottom.grab(), "runs_table.png")
        save(window.setup.grab(), "setup_panel.png")
        window.live.set_loss_x("examples", True)
        settle()
        save(window.grab(), "walkthrough_examples_log.png")
        window.live.set_loss_x("step", False)
        window.views.setCurrentIndex(1)
        settle()
        save(window.grab(), "summary.png")
        if not args.no_targets:
            targets = Path(args.targets_file) if args.targets_file else Path(tmp) / "to-target.h5"
            if not args.targets_file:
                print(f"running a train-to-target sweep headless into {targets} ...", file=sys.stderr)
                command = [sys.executable, "-m", "batchlab.main", "sweep", *TARGETS, "--out", str(targets)]
                subprocess.run(command, check=True, cwd=tmp)
            window.open_file(str(targets))
            window.use_file_settings()
            window.status_label.setText(f"Opened {targets.name}: {window.data.status}, {len(window.data.runs)} runs")
            window.views.setCurrentIndex(0)
            settle()
            save(window.grab(), "walkthrough_targets.png")
            window.views.setCurrentIndex(1)
            settle()
            save(window.grab(), "walkthrough_seeds.png")
        if not args.no_compare:
            other = Path(tmp) / "one-epoch.h5"
            print(f"running a 1-epoch variant into {other} to compare ...", file=sys.stderr)
            if run_from_window(window, COMPARE, other):
                window.open_file(str(run_file))
                window.open_compare(str(other))
                window.status_label.setText(f"Comparing {run_file.name} with {other.name}")
                window.setup.set_values(SWEEP)
                window.setup.out.setText("runs/my-sweep.h5")
                in_each_theme(window, "compare", tab=1)
        convergence_shots(window, tmp)
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
