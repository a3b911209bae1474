"""A long sweep of tiny synthetic runs fed to the real window, with its memory and GUI-thread stalls sampled.

Shared by tests/gui/test_window_memory.py (40 runs) and bench/bench_window_soak.py (hundreds). No
TensorFlow: the events of tests/gui/synthetic.py are handed to the window as its sweep worker hands
them, on a simulated clock, with the window's refresh ticks and Qt's paints in between.
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from dataclasses import dataclass

from tests.gui.synthetic import sweep_events

SOAK_BATCH_SIZES = (8, 16, 32, 64, 128, 256)
SOAK_SAMPLES = 256  # tiny runs: 32 steps per epoch at batch 8, one at 256
SOAK_EPOCHS = 2
TICK_S = 0.05  # simulated seconds between two GUI-thread steps (the refresher's tick)
TICKS_AFTER_EVENT = 3  # ticks between two events of a run (a steps record every ~0.15 s)
TICKS_AFTER_RUN = 20  # ticks after a run ends (the next child starting), so each frame is drawn


def rss_mib() -> float:
    """This process's resident memory (MiB), from /proc."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def runs_data_mib(data) -> float:
    """Bytes the runs' own columns hold (steps, epochs, evaluations, noise scale; allocated capacity), MiB."""
    total = 0
    for run in data.runs.values():
        for table in (run.steps, run.epochs, run.evals, run.noise_scale):
            total += sum(column.nbytes for column in table._data.values())
    return total / 2**20


@dataclass
class Sample:
    runs: int  # runs ended so far
    rss_mib: float  # the process's RSS after a full garbage collection
    data_mib: float  # the runs' own columns
    longest_ms: float  # the longest GUI-thread step (events handed over, a tick, Qt's paints) since the last sample
    items: int  # graphics items in the live plots


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


class _Worker:
    """Stands in for the sweep worker: the window counts as running while the stream plays."""

    stop_requested = False

    def __init__(self):
        self.alive = True

    def isRunning(self) -> bool:  # noqa: N802 (Qt's name)
        return self.alive


def soak_window(app, runs: int, every: int = 10, tab: str = "live", on_sample=None):
    """Feed `runs` tiny runs (batch 8 to 256, seeds 0, 1, ...) to a fresh MainWindow; a Sample every `every` runs.

    Returns (window, samples); the caller closes the window. `on_sample(sample)` is called as each is taken.
    """
    from batchlab.core.model import SweepData
    from batchlab.core.spec import build_spec
    from batchlab.core.sweep.progress import SweepProgress
    from batchlab.gui.main_window import MainWindow
    from PySide6.QtCore import QSettings

    window = MainWindow(QSettings(tempfile.mktemp(suffix=".ini"), QSettings.Format.IniFormat))
    window.resize(1440, 900)
    window.show()
    clock = _Clock()
    for holder in (window.refresher, window.refresher.pacer):
        holder._clock = clock
    window.live.position.clock = clock
    window.views.setCurrentWidget(getattr(window, tab))
    for _ in range(5):
        app.processEvents()
    seeds = range(-(-runs // len(SOAK_BATCH_SIZES)))
    fields = {"preset": "mnist-mlp", "samples": SOAK_SAMPLES, "epochs": SOAK_EPOCHS}
    events = sweep_events(batch_sizes=SOAK_BATCH_SIZES, seeds=seeds, epochs=SOAK_EPOCHS, samples=SOAK_SAMPLES)
    window.data = SweepData(label="soak.h5", path="soak.h5")
    window.progress = SweepProgress(build_spec({**fields, "batch_sizes": list(SOAK_BATCH_SIZES)}), clock=clock)
    window.worker, window._worker_done = _Worker(), False
    window._show_sweep(window.data, "main")
    refresher = window.refresher
    refresher.start()
    refresher.timer.stop()  # the simulated clock ticks instead of the timer
    refresher.timer.start = lambda *_a: None
    longest = 0.0

    def step(batch: list) -> None:
        nonlocal longest
        t0 = time.perf_counter()
        clock.now += TICK_S
        if batch:
            window._on_events(batch)
        if clock.now >= refresher.next_tick_at - 1e-9:
            window.refresh()
        app.processEvents()
        longest = max(longest, time.perf_counter() - t0)

    samples: list[Sample] = []
    ended = 0
    for event in events:
        step([event])
        for _ in range(TICKS_AFTER_EVENT):
            step([])
        if event["type"] != "run_ended":
            continue
        ended += 1
        for _ in range(TICKS_AFTER_RUN):
            step([])
        if ended % every == 0:
            gc.collect()
            items = sum(len(w.getPlotItem().items) for w in window.live.plots.values())
            sample = Sample(ended, rss_mib(), runs_data_mib(window.data), 1000 * longest, items)
            samples.append(sample)
            if on_sample is not None:
                on_sample(sample)
            longest = 0.0
        if ended >= runs:
            break
    window.worker.alive, window._worker_done = False, True
    refresher.stop()
    return window, samples


def slope(samples: list[Sample], value) -> float:
    """Least-squares slope of value(sample) per run ended."""
    xs = [s.runs for s in samples]
    ys = [value(s) for s in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def growth_beyond_data(samples: list[Sample]) -> float:
    """MiB per run the window grew beyond the runs' own columns, over the second half of the samples."""
    half = samples[len(samples) // 2 :]
    return slope(half, lambda s: s.rss_mib - s.data_mib)
