"""The window over a long sweep: its resident memory and the GUI thread's longest stall, run after run.

    .venv/bin/python bench/bench_window_soak.py                 # 240 runs, offscreen, Live tab (~2 min)
    .venv/bin/python bench/bench_window_soak.py --runs 500 --every 25
    .venv/bin/python bench/bench_window_soak.py --open 500      # open and compare a 500-run file

No training: tests/gui/soak.py feeds a real MainWindow a sweep of tiny synthetic runs (batch 8 to 256, seeds
0, 1, ..., 256 samples, 2 epochs) as its sweep worker would, on a simulated clock, with the window's refresh
ticks and Qt's paints between events. Every --every runs it collects garbage and notes the process's RSS,
the bytes the runs' own columns hold, and the longest GUI-thread step since the last row (events handed
over + one refresh tick + the paints it caused: no stall can be shorter). Printed: a table over time and the
per-run slopes over the second half (target: RSS minus the runs' columns grows <= 0.1 MiB per run).

--real S runs a real sweep (TensorFlow children; mnist-mlp, 256 samples, 1 epoch, batch 8 to 256, seeds 0 to
S-1) from the window and reads RSS at each run's end; --real S --headless runs the same sweep without a
window (`run_sweep` in this process: the runner and the one writer alone), to tell the window's share.

--open N writes an N-run file with the real RunFileWriter, then opens it in a fresh window, compares it
with itself, and switches tabs; every GUI-thread call is timed, and a 10 ms heartbeat timer measures the
longest gap the event loop saw (target: < 100 ms) and the GUI thread's own CPU time in its longest-working gap
(time.thread_time: what the thread did, without the waits for a core a loaded machine adds; GIL waits behind a
worker thread are not in it either, the wall gap has them). Each step waits until the plots' slices are drawn
(the refresher stops ticking) and the worker's figures are drawn, then settles; each step also prints its
longest garbage collection on the GUI thread (gc.callbacks). Timings vary with the machine's
load; memory does not.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BOUND_MIB_PER_RUN = 0.1
STALL_TARGET_MS = 100.0
DRAW_WAIT_S = 20.0  # --open: the most a step waits for the refresher's last tick (its slices of runs drawn)


def soak(runs: int, every: int, tab: str, screenshot: str | None = None, size: str = "1440x900") -> int:
    from PySide6.QtWidgets import QApplication

    from tests.gui.soak import growth_beyond_data, rss_mib, slope, soak_window

    app = QApplication.instance() or QApplication(["batchlab-bench"])
    start = rss_mib()
    print(f"RSS before the window: {start:.1f} MiB; load average {os.getloadavg()[0]:.1f}")
    print(f"{'runs':>5} {'RSS MiB':>9} {'columns MiB':>12} {'RSS-columns':>12} {'longest step ms':>16}")

    def show(s):
        print(f"{s.runs:5d} {s.rss_mib:9.1f} {s.data_mib:12.2f} {s.rss_mib - s.data_mib:12.1f} {s.longest_ms:16.0f}")

    t0 = time.monotonic()
    window, samples = soak_window(app, runs, every=every, tab=tab, on_sample=show)
    elapsed = time.monotonic() - t0
    half = samples[len(samples) // 2 :]
    rss_slope = slope(half, lambda s: s.rss_mib)
    data_slope = slope(half, lambda s: s.data_mib)
    beyond = growth_beyond_data(samples)
    print(f"{runs} runs in {elapsed:.0f} s; tab {tab}; load average at the end {os.getloadavg()[0]:.1f}")
    print(
        f"per run over runs {half[0].runs}-{half[-1].runs}: RSS {rss_slope:.3f} MiB, the runs' columns "
        f"{data_slope:.3f} MiB, beyond them {beyond:.3f} MiB (target <= {BOUND_MIB_PER_RUN})"
    )
    print(f"longest GUI-thread step: {max(s.longest_ms for s in samples):.0f} ms")
    items = {name: len(w.getPlotItem().items) for name, w in window.live.plots.items()}
    print(f"live plot items at the end: {items}")
    caught_up(app, window, tab)
    if screenshot:
        take_screenshots(app, window, screenshot, size)
    window.close()
    return 0 if beyond <= BOUND_MIB_PER_RUN else 1


def caught_up(app, window, tab: str) -> None:
    """A shown Summary or Analysis computes a live sweep's figures off the GUI thread (gui/figure_worker.py): say
    how many jobs ran there and how long after the stream its figures showed every run."""
    view = {"summary_splitter": window.summary, "analysis": window.analysis}.get(tab)
    if view is None:
        return
    t0 = time.monotonic()
    view.refresh(force=False)
    while time.monotonic() - t0 < 60 and not (
        view.computing is None and not view.drawing and view._figures and view._figures[0] == view.data_version()
    ):
        app.processEvents()
        time.sleep(0.005)
    worker = window.figure_worker
    where = "forked children" if worker.in_child else "the worker thread"
    print(
        f"the {tab} figures: {worker.jobs} jobs in {where} ({worker.lost} lost), drawn with every run "
        f"{time.monotonic() - t0:.2f} s after the stream's end; {fork_line(window)}"
    )


def fork_line(window) -> str:
    return f"longest fork on the GUI thread {1000 * window.figure_worker.longest_fork_s:.1f} ms"


def take_screenshots(app, window, path: str, size: str) -> None:
    """The window after the soak (PATH, at `size`), and at 1024x700 with run 7 selected in the table
    (PATH-selected.png): a run of long ago gets its own highlighted curve over the dimmed groups."""
    width, height = (int(v) for v in size.split("x"))
    window.resize(width, height)
    window.refresh(full=True)
    for _ in range(10):
        app.processEvents()
    save(window, path)
    window.resize(1024, 700)  # the smallest window BatchLab fits
    window.table.selectRow(7)
    window.refresh(full=True)
    for _ in range(10):
        app.processEvents()
    selected = str(Path(path).with_suffix("")) + "-selected.png"
    save(window, selected)
    print(f"screenshots: {path}, {selected}")


def save(window, path: str) -> None:
    """The window as a PNG of 256 colours (as scripts/screenshots.py keeps them), where ImageMagick is there."""
    window.grab().save(path)
    magick = shutil.which("magick") or shutil.which("convert")
    if magick is not None:
        subprocess.run([magick, path, "+dither", "-colors", "256", f"PNG8:{path}"], check=True)


REAL_SPEC = {"preset": "mnist-mlp", "samples": "256", "val_samples": "64", "epochs": "1", "device": "cpu"}


def real_sweep(seeds: int, headless: bool) -> int:
    """A real sweep's RSS at each run_ended, from the window or headless; prints the slope over the second half."""
    from tests.gui.soak import SOAK_BATCH_SIZES, rss_mib, runs_data_mib

    values = {
        **REAL_SPEC,
        "batch_sizes": ", ".join(map(str, SOAK_BATCH_SIZES)),
        "seeds": ",".join(map(str, range(seeds))),
    }
    out = str(Path(tempfile.mkdtemp()) / "real.h5")
    rows: list[tuple[int, float, float]] = []
    t0 = time.monotonic()
    if headless:
        from batchlab.core.spec import build_spec
        from batchlab.core.sweep.runner import run_sweep

        def sink(event: dict) -> None:
            if event.get("type") == "run_ended":
                rows.append((len(rows) + 1, rss_mib(), 0.0))

        run_sweep(build_spec(values), out, sink=sink)
    else:
        from batchlab.gui.main_window import MainWindow
        from PySide6.QtCore import QSettings
        from PySide6.QtTest import QTest
        from PySide6.QtWidgets import QApplication

        app = QApplication.instance() or QApplication(["batchlab-bench"])  # noqa: F841 (kept alive)
        window = MainWindow(QSettings(tempfile.mktemp(suffix=".ini"), QSettings.Format.IniFormat))
        window.resize(1440, 900)
        window.show()
        window.setup.set_values(values)
        window.setup.out.setText(out)

        def on_events(batch: list) -> None:
            for event in batch:
                if event.get("type") == "run_ended":
                    rows.append((len(rows) + 1, rss_mib(), runs_data_mib(window.data)))

        window.actions["run"].trigger()
        if not window.running:
            print(f"the sweep did not start: {window.setup.errors}")
            return 2
        window.worker.events.connect(on_events)
        while window.running:
            QTest.qWait(50)
        window.close()
    where = "headless" if headless else "from the window"
    print(f"{len(rows)} real runs {where} in {time.monotonic() - t0:.0f} s; load average {os.getloadavg()[0]:.1f}")
    for run, rss, data in rows[:: max(1, len(rows) // 12)]:
        print(f"  run {run:3d}: RSS {rss:6.1f} MiB, the runs' columns {data:.2f} MiB")
    half = rows[len(rows) // 2 :]
    xs, ys = [r for r, _rss, _d in half], [rss - d for _r, rss, d in half]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    per_run = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    print(f"per run over runs {xs[0]}-{xs[-1]}: RSS beyond the runs' columns {per_run:.3f} MiB")
    return 0


def open_and_compare(runs: int, existing: str | None = None) -> int:
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from tests.gui.soak import SOAK_BATCH_SIZES, SOAK_EPOCHS, SOAK_SAMPLES, rss_mib
    from tests.gui.synthetic import write_run_file

    app = QApplication.instance() or QApplication(["batchlab-bench"])
    folder = Path(tempfile.mkdtemp())
    seeds = range(-(-runs // len(SOAK_BATCH_SIZES)))
    t0 = time.monotonic()
    if existing:
        path = existing
    else:
        path = write_run_file(
            folder / "big.h5", batch_sizes=SOAK_BATCH_SIZES, seeds=seeds, epochs=SOAK_EPOCHS, samples=SOAK_SAMPLES
        )
        print(f"wrote {len(seeds) * len(SOAK_BATCH_SIZES)} runs in {time.monotonic() - t0:.1f} s: {path}")
    from batchlab.gui.main_window import MainWindow

    window = MainWindow(QSettings(str(folder / "s.ini"), QSettings.Format.IniFormat))
    window.resize(1440, 900)
    window.show()
    for _ in range(5):
        app.processEvents()
    gaps: list[float] = []
    cpu_gaps: list[float] = []  # the GUI thread's own CPU time in each gap: what it did, without waiting for a core
    last = [time.perf_counter(), time.thread_time()]

    def beat() -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        gaps.append(now - last[0])
        cpu_gaps.append(cpu - last[1])
        last[0], last[1] = now, cpu

    collections: list[tuple[float, float]] = []  # (end, seconds) of each garbage collection on the GUI thread
    began = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if threading.current_thread() is threading.main_thread():
            if phase == "start":
                began[0] = time.perf_counter()
            else:
                collections.append((time.perf_counter(), time.perf_counter() - began[0]))

    gc.callbacks.append(on_gc)
    heartbeat = QTimer()
    heartbeat.timeout.connect(beat)
    heartbeat.start(10)
    timed: list[tuple[str, float]] = []
    stalls: list[tuple[str, float, float, float]] = []

    def call(name, fn, reader: str | None = None, after_s: float = 0.3) -> None:
        """Time fn (and, for a threaded read, until it is shown), then let the window settle for after_s;
        the longest heartbeat gap from the call to the end of the settling is the step's stall."""
        first = len(gaps)
        t = time.perf_counter()
        fn()
        timed.append((name, 1000 * (time.perf_counter() - t)))
        if reader is not None:  # read in the worker thread: wait (handling events) until it is shown
            while window.readers[reader].busy:
                app.processEvents()
                time.sleep(0.002)
            timed.append((f"{name}: read and shown", 1000 * (time.perf_counter() - t)))
        if window.refresher.active:  # the plots drawn a slice per tick: wait until the last one is drawn
            while window.refresher.active and time.perf_counter() - t < DRAW_WAIT_S:
                app.processEvents()
                time.sleep(0.002)
            timed.append((f"{name}: plots drawn", 1000 * (time.perf_counter() - t)))
        views = (window.summary, window.explanation, window.analysis)
        if any(figures_pending(v) for v in views):  # figures computed in the worker thread, drawn when back
            while any(figures_pending(v) for v in views):
                app.processEvents()
                time.sleep(0.002)
            timed.append((f"{name}: figures computed and drawn", 1000 * (time.perf_counter() - t)))
        settle(after_s)
        gc_ms = 1000 * max((d for end, d in collections if end >= t), default=0.0)
        longest, cpu = 1000 * max(gaps[first:], default=0.0) - 10, 1000 * max(cpu_gaps[first:], default=0.0)
        stalls.append((name, longest, cpu, gc_ms))

    def figures_pending(view) -> bool:
        return getattr(view, "computing", None) is not None or getattr(view, "drawing", False)

    def settle(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            app.processEvents()
            time.sleep(0.002)

    before = rss_mib()
    settle(0.2)
    call("open", lambda: window.open_file(path), "main", 1.8)  # the last frame draws one plot per tick
    call("compare", lambda: window.open_compare(path), "compare", 1.8)
    for index in range(window.views.count()):
        call(f"tab {window.views.tabText(index)}", lambda index=index: window.views.setCurrentIndex(index))
    call("back to tab Live", lambda: window.views.setCurrentIndex(0), after_s=1.8)
    call("select a run", lambda: window.table.selectRow(3), after_s=0.8)
    heartbeat.stop()
    for name, ms in timed:
        print(f"  {name:>24}: {ms:6.0f} ms (the call itself)")
    gc.callbacks.remove(on_gc)
    for name, ms, cpu_ms, gc_ms in stalls:
        print(
            f"  {name:>24}: longest heartbeat gap {ms:6.0f} ms; most GUI-thread CPU in one gap {cpu_ms:6.0f} ms; "
            f"longest garbage collection {gc_ms:4.0f} ms"
        )
    longest = 1000 * max(gaps) - 10
    print(f"longest heartbeat gap beyond its 10 ms: {longest:.0f} ms (target < {STALL_TARGET_MS:.0f})")
    print(f"most GUI-thread CPU time in one gap: {1000 * max(cpu_gaps):.0f} ms (the gap without waiting for a core)")
    print(f"RSS: {before:.1f} -> {rss_mib():.1f} MiB; load average {os.getloadavg()[0]:.1f}")
    print(f"figures jobs in forked children: {window.figure_worker.children}; {fork_line(window)}")
    window.close()
    return 0 if longest < STALL_TARGET_MS else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=240, help="runs in the soak")
    parser.add_argument("--every", type=int, default=20, help="a row every this many runs")
    parser.add_argument("--tab", default="live", choices=("live", "summary_splitter", "analysis"), help="tab shown")
    parser.add_argument("--screenshot", metavar="PNG", help="save the window after the soak (and with a run selected)")
    parser.add_argument("--size", default="1440x900", help="the window's size for --screenshot")
    parser.add_argument("--real", type=int, default=0, metavar="S", help="a real sweep of seeds 0..S-1 instead")
    parser.add_argument("--headless", action="store_true", help="with --real: the same sweep without a window")
    parser.add_argument("--open", type=int, default=0, metavar="N", help="open and compare an N-run file instead")
    parser.add_argument("--file", metavar="H5", help="with --open: this run file instead of writing one")
    args = parser.parse_args(argv)
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    if args.real:
        return real_sweep(args.real, args.headless)
    if args.open:
        return open_and_compare(args.open, args.file)
    return soak(args.runs, args.every, args.tab, args.screenshot, args.size)


if __name__ == "__main__":
    sys.exit(main())
