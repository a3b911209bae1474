"""The run file's format: its name, version, file suffixes and the error for files BatchLab cannot read.

Shared by the writer and the reader (docs/runfile-format.md describes the layout).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from batchlab.core.errors import SpecError
from batchlab.core.events import Column
from batchlab.core.paths import RUN_FILE_SUFFIXES

FORMAT = "batchlab-sweep"
FORMAT_VERSION = 1
FILE_SUFFIXES = RUN_FILE_SUFFIXES  # core.paths holds the run-file path rules
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


class RunFileError(SpecError):
    """A file the user named is not a run file BatchLab can read; the message says which and why."""

    def __init__(self, message: str):
        super().__init__("file", message)


def run_group_name(index: int) -> str:
    """Name of a run's group under /runs, e.g. run_007."""
    return f"run_{index:03d}"


def int_or(value: Any, default: int = -1) -> int:
    """`value` as an int, or `default` when it is missing or not a number (files store -1 for missing)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def missing_value(dtype: str) -> float | int:
    """The value stored where an event lacks a column: NaN for floats, -1 for integers."""
    return -1 if np.dtype(dtype).kind in "iu" else math.nan


def column_values(column: Column, values: Any, n: int) -> np.ndarray:
    """`values` as n items of the column's dtype; None, NaN in an integer column, missing or short
    lists become the missing value (NaN, or -1 for integers).

    The writer and the live model both use it, so a run reads the same live and from its file.
    """
    fill = missing_value(column.dtype)
    out = np.full(n, fill, dtype=column.dtype)
    if values is None:
        return out
    is_int = np.dtype(column.dtype).kind in "iu"
    if isinstance(values, np.ndarray) and values.dtype.kind in "iub" and values.ndim == 1:  # e.g. read back
        out[: min(n, len(values))] = values[:n]
        return out
    try:  # numpy turns None into NaN in a float array; integers pass through float64 (exact below 2**53)
        as_float = np.atleast_1d(np.asarray(values, dtype=np.float64 if is_int else column.dtype))[:n]
    except (TypeError, ValueError):
        items = [_clean(v, fill, is_int) for v in np.atleast_1d(np.asarray(values, dtype=object)).tolist()][:n]
        out[: len(items)] = items
        return out
    if is_int:
        as_float = np.where(np.isfinite(as_float), as_float, fill)
    out[: len(as_float)] = as_float
    return out


def _clean(value: Any, fill: float | int, is_int: bool) -> Any:
    if value is None:
        return fill
    if is_int and isinstance(value, float) and not math.isfinite(value):
        return fill
    return value
