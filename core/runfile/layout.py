"""Where things go in a run file: its tables (columns, chunk sizes, NeXus tags), the run attributes the writer
sets itself and the root attributes it owns (docs/runfile-format.md). core/runfile/writer.py writes by them.
"""

from __future__ import annotations

import math
from typing import Any

import h5py
import numpy as np
from batchlab.core.events import EPOCH_COLUMNS, EVAL_COLUMNS, LR_RANGE_COLUMNS, NOISE_SCALE_COLUMNS, STEP_COLUMNS

STEP_CHUNK = 1024  # rows per chunk: small enough that an epoch flush recompresses little (files ~45% smaller than 4096)
EPOCH_CHUNK = 64
EVAL_CHUNK = 64
LR_RANGE_CHUNK = 256
NOISE_SCALE_CHUNK = 64
LOG_CHUNK = 256
GZIP_LEVEL = 4
INTERRUPTED_MESSAGE = "sweep ended before this run finished"
# NeXus-style tags (NX_class, signal, axes): generic viewers (silx view, HDFView) plot the tables as they are.
NX_TABLES = {
    "steps": ("loss", "step"),
    "epochs": ("train_loss", "epoch"),
    "evals": ("train_loss", "steps"),
    "lr_range": ("smoothed_loss", "lr"),
    "noise_scale": ("b_simple", "step"),
}  # group -> (signal, axes)
TABLES = {
    "steps": (STEP_COLUMNS, STEP_CHUNK),
    "epochs": (EPOCH_COLUMNS, EPOCH_CHUNK),
    "evals": (EVAL_COLUMNS, EVAL_CHUNK),
    "lr_range": (LR_RANGE_COLUMNS, LR_RANGE_CHUNK),
    "noise_scale": (NOISE_SCALE_COLUMNS, NOISE_SCALE_CHUNK),
}
# Run attributes the writer sets itself; other scalar run_started / run_ended fields are stored as they come.
RUN_ATTRS = frozenset(
    ("index", "batch_size", "seed", "nice", "status", "message", "pid", "device", "steps_per_epoch", "epochs")
    + ("samples", "started", "ended", "final_loss", "total_time", "samples_per_s", "NX_class", "default")
)
_EVENT_KEYS = frozenset(("type", "run"))
# Root attributes the writer owns; environment keys with these names stay only in `environment`.
RESERVED_ROOT_ATTRS = frozenset(
    ("format", "format_version", "created", "updated", "status", "message", "started", "ended")
    + ("app_version", "spec", "environment", "mode")
)


def _append(dataset: h5py.Dataset, values: np.ndarray) -> None:
    start = dataset.shape[0]
    dataset.resize((start + len(values),))
    dataset[start:] = values


def _float_or_nan(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _extra_attrs(event: dict[str, Any]) -> dict[str, Any]:
    """The scalar fields of a run event the writer has no rule for, as HDF5 attribute values (bool as 0/1).

    Newer trainers add fields (engine, sync, fetch_overhead_s, tracing_time_s, ...) without a writer change.
    """
    out: dict[str, Any] = {}
    for key, value in event.items():
        if key in _EVENT_KEYS or key in RUN_ATTRS:
            continue
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool):
            out[key] = int(value)
        elif isinstance(value, (str, int, float)):
            out[key] = value
    return out
