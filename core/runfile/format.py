"""The run file's format: its name, version, file suffixes and the error for files BatchLab cannot read.

Shared by the writer and the reader (docs/runfile-format.md describes the layout).
"""

from __future__ import annotations

from typing import Any

from batchlab.core.spec import SpecError

FORMAT = "batchlab-sweep"
FORMAT_VERSION = 1
FILE_SUFFIXES = (".h5", ".hdf5")
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
