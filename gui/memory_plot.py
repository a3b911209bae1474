"""The live memory plot's parts that are not a plain epoch curve: the RSS baseline, the axis label, and
the running epoch's memory peaks so far.

On a CPU the only memory reading is the training process's host RSS: the axis says so, and each run's
RSS before its first step is drawn as a dashed baseline across its epochs, so the part that depends
on the batch size shows (the axis then spans from the baselines instead of from zero).
"""

from __future__ import annotations

import numpy as np
from batchlab.core.figures import RunningEpoch
from batchlab.core.model import RunData
from batchlab.gui.plot_style import MIB

RSS_BASE = "rss_before_training_bytes"  # run attribute: the training child's RSS before its first step
BASELINE_OVERHANG = 0.3  # epochs the baseline reaches past the first and last epoch's points
MEMORY_SERIES = ("tf_peak_bytes", "device_memory_bytes", "rss_peak_bytes")
# The memory plot's provisional markers: the running epoch's peaks so far (the steps events' "memory"),
# one per memory series with its series' symbol
MEMORY_SYMBOLS = {"tf_peak_bytes": "o", "device_memory_bytes": "t", "rss_peak_bytes": "s"}


def rss_only(run: RunData, n: int) -> bool:
    """True if host RSS is this run's only memory reading over its first n epochs (a CPU run)."""
    return not any((np.asarray(run.epochs[c][:n]) > 0).any() for c in ("tf_peak_bytes", "device_memory_bytes"))


def baseline(run: RunData, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """x (epochs), y (MiB) of a run's RSS-before-training line over its first n epochs; None where not drawn
    (no baseline recorded, or the run has a device memory reading)."""
    base = run.attrs.get(RSS_BASE)
    if base is None or not base > 0 or not rss_only(run, n):
        return None
    x = np.array([1 - BASELINE_OVERHANG, n + BASELINE_OVERHANG])  # a line, even under one epoch
    return x, np.full(2, float(base) / MIB)


def epoch_memory(run: RunData, column: str, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """x (epochs), y (MiB) of one memory column over the first n epochs; None where it has no reading."""
    y = np.asarray(run.epochs[column][:n], dtype=float)
    if not (y > 0).any():
        return None
    return np.asarray(run.epochs["epoch"][:n], dtype=float) + 1, np.where(y > 0, y / MIB, np.nan)


def on_cpu(spec: dict, environment: dict, runs: list[RunData]) -> bool:
    """True if a sweep trains on the CPU, as far as its start says: device cpu, or auto where TensorFlow saw no
    GPU (the environment the sweep started with), or a run that says it ran on the cpu."""
    if any(run.attrs.get("device") == "cpu" for run in runs):
        return True
    device = spec.get("device")
    devices = environment.get("devices") or []
    return device == "cpu" or (device == "auto" and bool(devices) and all(d.get("kind") != "GPU" for d in devices))


def expected_columns(spec: dict, environment: dict, runs: list[RunData]) -> set[str]:
    """The memory columns a sweep will draw, known before its first epoch ends: on a CPU host RSS and each
    run's RSS before training (so the axis label, the legend and the curves are made before training
    starts, not in the middle of it); empty where it is not known yet (a GPU reports what it reports)."""
    return {"rss_peak_bytes", RSS_BASE} if on_cpu(spec, environment, runs) else set()


def axis_label(series_columns: set[str]) -> tuple[str, bool]:
    """(y label, whether the axis is anchored at zero) for the memory columns drawn (RSS_BASE included).

    "process RSS" where host RSS is the only reading; the zero anchor goes where baselines are drawn.
    """
    rss_only_drawn = bool(series_columns) and series_columns <= {"rss_peak_bytes", RSS_BASE}
    return ("process RSS" if rss_only_drawn else "memory"), RSS_BASE not in series_columns


def peaks_so_far(run: RunData, figures: RunningEpoch | None) -> list[tuple[float, float, str]]:
    """(epoch x, MiB, symbol) of the running epoch's memory peaks so far, as the training child last sent them."""
    sample = run.memory_so_far
    if figures is None or sample.get("epoch") != figures.epoch:
        return []
    points = []
    for column, symbol in MEMORY_SYMBOLS.items():
        value = sample.get(column)
        if value is not None and value > 0:
            points.append((figures.epoch + 1.0, float(value) / MIB, symbol))
    return points
