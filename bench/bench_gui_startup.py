"""Time from process start to a painted main window (target: under 2 s on the 2-core dev machine).

    .venv/bin/python bench/bench_gui_startup.py                 # offscreen unless a display is set
    xvfb-run -s "-screen 0 1600x1000x24" .venv/bin/python bench/bench_gui_startup.py

Each repeat starts a fresh interpreter that goes through the real entry point (main.main with no
subcommand -> gui.app.run_app) and reports the wall-clock time of the window's first paint; the
clock starts in this process just before the child is spawned, so interpreter start-up and every
import count. The child also reports whether TensorFlow was imported (it must not be).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 2.0

CHILD = r"""
import json, sys, time
t_start = time.time()
from PySide6.QtCore import QEvent, QObject, QSettings, QStandardPaths
from PySide6.QtWidgets import QApplication, QMainWindow
QStandardPaths.setTestModeEnabled(True)  # never touch the user's real settings
QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, sys.argv[1])
app = QApplication(["batchlab"])
t_qt = time.time()

class FirstPaint(QObject):
    def eventFilter(self, obj, event):
        if event.type() == QEvent.Type.Paint and isinstance(obj, QMainWindow) and "painted" not in marks:
            marks["painted"] = time.time()
            app.quit()
        return False

marks = {}
watcher = FirstPaint()
app.installEventFilter(watcher)
import main
code = main.main([])
print(json.dumps({"interpreter": t_start, "qt": t_qt, "painted": marks.get("painted"), "exit": code,
                  "tensorflow": "tensorflow" in sys.modules, "keras": "keras" in sys.modules}))
"""


def one_start(env: dict[str, str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="batchlab-bench-") as tmp:
        t0 = time.time()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, tmp], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
    if out.returncode != 0:
        raise SystemExit(f"child failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    marks = json.loads(out.stdout.strip().splitlines()[-1])
    if marks["painted"] is None:
        raise SystemExit("the window was never painted")
    return {
        "to_python": marks["interpreter"] - t0,
        "to_qt": marks["qt"] - t0,
        "to_paint": marks["painted"] - t0,
        "tensorflow": marks["tensorflow"] or marks["keras"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh starts to time (default 5)")
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
    platform = env.get("QT_QPA_PLATFORM") or ("xcb" if env.get("DISPLAY") else "wayland")
    one_start(env)  # warm the OS file cache; not counted
    results = [one_start(env) for _ in range(args.repeat)]
    paint = [r["to_paint"] for r in results]
    print(f"GUI start-up to first paint, platform {platform}, {args.repeat} fresh processes")
    for key, label in (("to_python", "interpreter running"), ("to_qt", "QApplication made"), ("to_paint", "painted")):
        values = [r[key] for r in results]
        median = statistics.median(values)
        print(f"  {label:<20} median {median:6.3f} s   min {min(values):6.3f}   max {max(values):6.3f}")
    verdict = "OK" if statistics.median(paint) < TARGET_S else "SLOWER THAN TARGET"
    print(f"  target < {TARGET_S:.1f} s: {verdict}")
    tf = any(r["tensorflow"] for r in results)
    print(f"  TensorFlow/Keras imported in the GUI process: {'YES (bug)' if tf else 'no'}")
    return 1 if tf else 0


if __name__ == "__main__":
    sys.exit(main())
