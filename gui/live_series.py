"""What the live plots show: their series, titles, axes and legends, and the loss plots' x axes.

Tables only (and the examples-seen x axis), so that gui/live_plots.py holds the drawing and a
newcomer finds "which column does the throughput plot draw" in one place.
"""

from __future__ import annotations

import numpy as np
from batchlab.core.model import RunData
from batchlab.gui.memory_plot import RSS_BASE
from PySide6.QtCore import Qt

RunKey = tuple[str, int]  # (source id: "main" or "compare", run index)

# Colours mean the same batch size in every plot, so only the two loss plots name the batch sizes
# in their legends; the others explain their line styles (short legends leave room for the data).
BATCH_LEGEND = ("loss_step", "loss_time")

# series id -> (plot id, x column, y column, table, symbol, pen style or None).
# The x column "loss_x" is the loss plot's chosen axis (LOSS_X).
SERIES = {
    "loss_step": ("loss_step", "loss_x", "loss", "steps", None, None),
    "loss_time": ("loss_time", "wall_time", "loss", "steps", None, None),
    "train_loss": ("loss_epoch", "epoch", "train_loss", "epochs", "o", None),
    "val_loss": ("loss_epoch", "epoch", "val_loss", "epochs", "t", Qt.PenStyle.DotLine),
    "throughput": ("throughput", "epoch", "samples_per_s", "epochs", "o", None),
    "tf_peak": ("memory", "epoch", "tf_peak_bytes", "epochs", "o", None),
    "device_mem": ("memory", "epoch", "device_memory_bytes", "epochs", "t", Qt.PenStyle.DashDotLine),
    "rss": ("memory", "epoch", "rss_peak_bytes", "epochs", "s", Qt.PenStyle.DotLine),
    # run attribute, drawn across the run's epochs where host RSS is the only memory reading (a CPU)
    "rss_base": ("memory", "epoch", RSS_BASE, "epochs", None, Qt.PenStyle.DashLine),
}

PLOTS = {
    # plot id -> title, x label, x units, y label, y units. Titles short enough for a 1024 px window
    # (about 130 px a plot); what they leave out is on the axes. A longer one is elided, see let_title_shrink.
    "loss_step": ("Loss vs step", "step", None, "training loss", None),
    "loss_time": ("Loss vs time", "time in run", "s", "training loss", None),
    "loss_epoch": ("Loss per epoch", "epoch", None, "loss", None),
    "epoch_split": ("Time split", "batch size", None, "mean epoch time", "s"),
    "throughput": ("Throughput", "epoch", None, "epoch throughput", "samples/s"),  # the axis names which one
    "memory": ("Memory", "epoch", None, "memory", "MiB"),
}
# The loss plot's x axis choices: id -> (menu text, title, axis label, units)
LOSS_X = {
    "step": ("step", "Loss vs step", "step", None),
    "examples": ("examples seen", "Loss vs examples", "examples seen", None),
    "wall_time": ("wall-clock time", "Loss vs time", "time in run", "s"),
}
# Grey legend entries explaining a series' line style, added once the series has data
STYLE_LEGEND = {
    "train_loss": "train",
    "val_loss": "validation",
    "tf_peak": "TensorFlow peak",
    "device_mem": "device (nvidia-smi)",
    "rss": "process RSS",
    "rss_base": "before training",
}
PLOT_ORDER = tuple(PLOTS)
PLOT_TABLE = {plot_id: "steps" if plot_id in ("loss_step", "loss_time") else "epochs" for plot_id in PLOTS}
# Plots that also show evaluation points and target marks (gui/eval_marks.py), with their x axis ("loss_x": the choice)
EVAL_PLOTS = {"loss_step": "loss_x", "loss_time": "wall_time"}


def examples_seen(run: RunData, rows: np.ndarray) -> np.ndarray:
    """Training examples seen by the end of each of these step rows (the last batch of an epoch may be short)."""
    steps = run.steps
    if run.attrs.get("batch_schedule") not in (None, "constant"):  # the batch changes: count the real ones
        return np.cumsum(np.asarray(steps["batch_size"], dtype=np.float64))[rows]
    step = np.asarray(steps["step"][rows], dtype=np.int64)
    batch = run.batch_size
    samples, per_epoch = run.attrs.get("samples"), run.steps_per_epoch
    if not samples or not per_epoch:
        return ((step + 1) * batch).astype(float)
    epoch = np.asarray(steps["epoch"][rows], dtype=np.int64)
    return np.asarray(examples_done(epoch, step - epoch * per_epoch + 1, batch, int(samples)), dtype=float)


def examples_done(epochs: np.ndarray | int, steps_into_epoch: np.ndarray | int, batch: int, samples: int):
    """Examples seen after whole epochs of `samples` and these steps of the next (its last batch may be short)."""
    return epochs * samples + np.minimum(steps_into_epoch * batch, samples)
