"""What one live-plot repaint costs the GUI thread, as BatchLab sets its plots up vs pyqtgraph's defaults.

    .venv/bin/python bench/bench_plot_repaint.py              # offscreen, 200 repaints per cell
    .venv/bin/python bench/bench_plot_repaint.py --repaints 500

During a sweep every repaint is CPU taken from training; the cheaper a repaint,
the less the live plots, redrawn every frame, take from it. Two windows show the same synthetic sweep (three
runs, 4096 samples, 6 epochs): one as BatchLab makes its plots, one with pyqtgraph's defaults
put back (clip-to-view and peak downsampling on every plot, dynamicRangeLimit on every curve,
three tick levels per axis). Each plot is repainted synchronously with its view unchanged, with
the x range moving (as while steps arrive) and with the y range moving (the range change and
the repaint are timed together); the two windows take turns, so machine drift favours neither.
CPU time of this thread per repaint, medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # gui and tests.gui.synthetic

SCENARIOS = ("unchanged", "x range moves", "y range moves")


def make_window(pyqtgraph_defaults: bool):
    import pyqtgraph as pg
    from batchlab.core.model import SweepData
    from batchlab.gui.main_window import MainWindow
    from PySide6.QtCore import QSettings

    from tests.gui.synthetic import sweep_events

    window = MainWindow(QSettings(tempfile.mktemp(suffix=".ini"), QSettings.Format.IniFormat))
    window.show()
    data = SweepData(label="bench")
    for event in sweep_events(batch_sizes=(32, 128, 512), epochs=6, samples=4096):
        data.handle(event)
    window._show_sweep(data, "main")
    if pyqtgraph_defaults:
        for widget in window.live.plots.values():
            item = widget.getPlotItem()
            # (pyqtgraph cannot set either on a plot holding bars: the epoch-time split keeps its axes only)
            if all(isinstance(curve, pg.PlotDataItem) for curve in item.curves):
                item.setClipToView(True)
                item.setDownsampling(auto=True, mode="peak")
                for curve in item.curves:
                    curve.setDynamicRangeLimit(1e6)
            for name in ("bottom", "left"):
                item.getAxis(name).setStyle(maxTickLevel=2)
    return window


def repaint_ms(widget, scenario: str, count: int) -> list[float]:
    view = widget.getPlotItem().getViewBox()
    (x0, x1), (y0, y1) = view.viewRange()
    out = []
    for i in range(count):
        t = time.thread_time()  # the range change counts: curves and axes react to it before the paint
        if scenario == "x range moves":
            view.setXRange(x0, x1 + (i % 2) * 0.05 * (x1 - x0), padding=0)
        elif scenario == "y range moves":
            view.setYRange(y0, y1 + (i % 2) * 0.05 * (y1 - y0), padding=0)
        widget.viewport().repaint()
        out.append((time.thread_time() - t) * 1000)
    view.setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repaints", type=int, default=200, help="repaints per plot, scenario and window")
    args = parser.parse_args(argv)
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(["batchlab-bench"])
    windows = {"pyqtgraph defaults": make_window(True), "BatchLab": make_window(False)}
    for _ in range(10):
        app.processEvents()
    costs: dict[tuple[str, str, str], list[float]] = {}
    rounds = 4  # the windows take turns, a quarter of the repaints each time
    for r in range(rounds):
        for name in windows if r % 2 == 0 else list(windows)[::-1]:
            for plot_id, widget in windows[name].live.plots.items():
                for scenario in SCENARIOS:
                    key = (plot_id, scenario, name)
                    costs.setdefault(key, []).extend(repaint_ms(widget, scenario, max(1, args.repaints // rounds)))
    platform = os.environ.get("QT_QPA_PLATFORM") or "xcb"
    print(f"platform: {platform}; {args.repaints} synchronous repaints per cell; ms of GUI-thread CPU, medians")
    print(f"{'plot':>12} {'view range':>14} {'pyqtgraph defaults':>19} {'BatchLab':>9} {'ratio':>6}")
    ratios = []
    for plot_id in windows["BatchLab"].live.plots:
        for scenario in SCENARIOS:
            base = statistics.median(costs[(plot_id, scenario, "pyqtgraph defaults")])
            ours = statistics.median(costs[(plot_id, scenario, "BatchLab")])
            ratios.append(ours / base)
            print(f"{plot_id:>12} {scenario:>14} {base:>19.2f} {ours:>9.2f} {ours / base:>6.2f}")
    print(f"BatchLab / defaults, geometric mean over all cells: {statistics.geometric_mean(ratios):.2f}")
    for window in windows.values():
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
