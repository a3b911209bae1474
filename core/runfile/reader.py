"""Reading a run file back into plain records (root attributes, spec, environment, runs, log).

The reader opens files with HDF5 file locking off, so the GUI can read a file while the sweep's
writer (in the same process, see core/runfile/writer.py) has it open and has flushed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from batchlab.core import __version__
from batchlab.core.figures import RunFigures, run_figures
from batchlab.core.runfile.format import FORMAT, FORMAT_VERSION, HDF5_SIGNATURE, RunFileError, int_or


def _native(value: Any) -> Any:
    """HDF5 attribute values as plain Python (str, int, float, list)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return [_native(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass
class RunRecord:
    """One run as the file holds it; `status` is exactly what the writer last wrote.

    `attrs` are the run group's attributes; `steps`, `epochs` and `evals` (evaluation points, empty
    for runs without a target or eval_every) map column names to arrays.
    """

    index: int
    batch_size: int
    seed: int
    status: str
    message: str
    attrs: dict[str, Any]
    steps: dict[str, np.ndarray]
    epochs: dict[str, np.ndarray]
    evals: dict[str, np.ndarray] = field(default_factory=dict)
    lr_range: dict[str, np.ndarray] = field(default_factory=dict)  # an LR range test's points (lr-find files)
    metrics: dict[str, np.ndarray] = field(default_factory=dict)  # train_NAME / val_NAME, one value per epoch
    noise_scale: dict[str, np.ndarray] = field(default_factory=dict)  # gradient noise scale measurements

    @cached_property
    def figures(self) -> RunFigures:
        """Every per-run figure, by the one set of rules in batchlab.core.figures (the live model uses the same);
        computed once, since a record read from a file does not change."""
        return run_figures(self.steps, self.epochs, self.attrs, self.evals)

    # Shorthands for the figures most scripts want.
    @property
    def final_loss(self) -> float:
        return self.figures.final_loss

    @property
    def total_time(self) -> float:
        return self.figures.total_time

    @property
    def samples_per_s(self) -> float:
        return self.figures.samples_per_s

    @property
    def peak_memory_bytes(self) -> int:
        return self.figures.peak_memory_bytes

    @property
    def peak_memory_source(self) -> str | None:
        return self.figures.peak_memory_source


@dataclass
class SweepRecord:
    """A whole run file: root attributes, the spec and environment it was made with, and its runs."""

    attrs: dict[str, Any]
    spec: dict[str, Any]
    environment: dict[str, Any]
    status: str
    runs: list[RunRecord]
    path: Path | None = None
    log: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        return str(self.attrs.get("message", ""))


def status_if_writer_gone(status: str) -> str:
    """How to read a status once no writer holds the file: "running" then means "interrupted"."""
    return "interrupted" if status == "running" else status


def _json_attr(attrs: dict[str, Any], name: str) -> dict[str, Any]:
    try:
        value = json.loads(attrs.get(name) or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _read_table(group: h5py.Group | None) -> dict[str, np.ndarray]:
    """Every 1-D dataset of a steps/ or epochs/ group, trimmed to a common length.

    Columns can differ in length only when a writer died between appending them; the extra
    rows of the longer columns are incomplete and are dropped. Read through h5py's low-level
    API (one object open and one read per column): h5py's Group/Dataset wrappers cost more
    than the read itself on files of hundreds of runs (a 504-run file: 5.3 s -> 4.3 s).
    """
    if group is None:
        return {}
    table: dict[str, np.ndarray] = {}
    for raw in group.id:
        oid = h5py.h5o.open(group.id, raw)
        if not isinstance(oid, h5py.h5d.DatasetID):
            continue
        space = oid.get_space()
        if space.get_simple_extent_ndims() != 1:
            continue
        name = raw.decode("utf-8", "replace")
        if oid.dtype.kind == "O":  # variable-length strings: h5py's wrapper knows how to read them
            table[name] = group[name][()]
            continue
        values = np.empty(space.shape, dtype=oid.dtype)
        if values.size:
            oid.read(h5py.h5s.ALL, h5py.h5s.ALL, values)
        table[name] = values
    n = min((len(v) for v in table.values()), default=0)
    return {name: values[:n] for name, values in table.items()}


def _read_run(group: h5py.Group) -> RunRecord:
    attrs = {k: _native(v) for k, v in group.attrs.items()}
    return RunRecord(
        index=int_or(attrs.get("index")),
        batch_size=int_or(attrs.get("batch_size")),
        seed=int_or(attrs.get("seed")),
        status=str(attrs.get("status", "pending")),
        message=str(attrs.get("message", "")),
        attrs=attrs,
        steps=_read_table(group.get("steps")),
        epochs=_read_table(group.get("epochs")),
        evals=_read_table(group.get("evals")),
        lr_range=_read_table(group.get("lr_range")),
        metrics=_read_metrics(group.get("metrics")),
        noise_scale=_read_table(group.get("noise_scale")),
    )


def _read_metrics(group: h5py.Group | None) -> dict[str, np.ndarray]:
    """The metrics/ group's datasets as they are (each one value per epoch row the metric was written for)."""
    if group is None:
        return {}
    return {name: ds[()] for name, ds in group.items() if isinstance(ds, h5py.Dataset) and ds.ndim == 1}


def _open_for_reading(path: Path) -> h5py.File:
    expected = "expected a BatchLab run file (.h5) written by a sweep"
    if not path.exists():
        raise RunFileError(f"{path} does not exist; {expected}")
    if not path.is_file():
        raise RunFileError(f"{path} is not a file; {expected}")
    try:
        # locking=False: the GUI reads while the writer (same process, also unlocked) has the file open.
        return h5py.File(path, "r", locking=False)
    except OSError as e:
        with open(path, "rb") as raw:
            is_hdf5 = raw.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE
        if is_hdf5:
            raise RunFileError(f"{path} is an HDF5 file but cannot be opened ({e}); {expected}") from None
        raise RunFileError(f"{path} is not an HDF5 file; {expected}") from None


def read_root_attrs(path: str | Path) -> dict[str, Any]:
    """A run file's root attributes alone (what wrote it, its mode): reading a whole 500-run file to ask one
    took seconds. Raises RunFileError for anything that is not an HDF5 file we can open."""
    with _open_for_reading(Path(path)) as f:
        return {k: _native(v) for k, v in f.attrs.items()}


def read_run_file(path: str | Path, progress: Callable[[int, int], None] | None = None) -> SweepRecord:
    """Load a whole run file. Raises RunFileError (field "file") for anything that is not one we can read.

    `progress(done, total)` is called after each run is read (a 500-run file takes seconds); an exception
    it raises stops the read and goes to the caller as it is (a window cancels a read that way).
    """
    path = Path(path)
    with _open_for_reading(path) as f:
        attrs = {k: _native(v) for k, v in f.attrs.items()}
        if attrs.get("format") != FORMAT:
            raise RunFileError(
                f"{path} is an HDF5 file but not a BatchLab run file (its root has no format='{FORMAT}' "
                "attribute); expected a file written by a BatchLab sweep"
            )
        version = int_or(attrs.get("format_version"))
        if version < 1:
            raise RunFileError(
                f"{path} has no valid format_version attribute at its root (found "
                f"{attrs.get('format_version')!r}); expected a whole number such as {FORMAT_VERSION}"
            )
        if version > FORMAT_VERSION:
            raise RunFileError(
                f"{path} uses run-file format version {attrs.get('format_version')}, newer than the version "
                f"{FORMAT_VERSION} this BatchLab {__version__} reads; update BatchLab to open it"
            )
        try:
            groups = [g for g in f.get("runs", {}).values() if isinstance(g, h5py.Group)]
            runs = []
            for group in groups:
                runs.append(_read_run(group))
                if progress is not None:
                    progress(len(runs), len(groups))
            log = [_native(line) for line in f["log"][()]] if "log" in f else []
        except (OSError, KeyError, ValueError) as e:
            raise RunFileError(
                f"{path} could not be read ({e}); if a sweep is writing it, try again after the next epoch"
            ) from None
    runs.sort(key=lambda r: r.index)
    return SweepRecord(
        attrs=attrs,
        spec=_json_attr(attrs, "spec"),
        environment=_json_attr(attrs, "environment"),
        status=str(attrs.get("status", "")),
        runs=runs,
        path=path,
        log=log,
    )
