"""The sweep's HDF5 run file, written by one writer in the parent process from the event stream.

The file explains itself (see docs/runfile-format.md): a ``format`` / ``format_version`` pair at
the root, one group per run, one chunked, gzip-compressed, resizable dataset per column with
``units`` and ``long_name`` attributes. The writer flushes after every epoch and every status
change, and while steps arrive at most every STEP_ROWS_FLUSH_SECONDS (a 2,500-step epoch at batch 4 showed
no step row in the file until it ended, and a kill of the sweep's process lost the whole epoch's steps), and
uses the default (oldest compatible) HDF5 format, so a writer killed mid-sweep
leaves a file that opens without ``h5clear``.

What a kill can destroy is bounded too. HDF5 keeps no journal: a chunk written between flushes
can land in space the last flushed state still points to. So the writer keeps every dataset it
appends to open (their chunks then reach the disk only at a flush) and turns off the reuse of
freed file space (``fs_strategy="none"``), so rewritten chunks go to fresh space and the last
flushed data stays readable. The price is a little dead space per flush.

Reading a file is core/runfile/reader.py; its format constants are core/runfile/format.py.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from batchlab.core import __version__
from batchlab.core.errors import SpecError
from batchlab.core.events import (
    EPOCH_COLUMNS,
    EPOCH_ENDED,
    EVAL_COLUMN_NAMES,
    EVAL_COLUMNS,
    EVALUATION,
    LOG,
    LR_RANGE,
    LR_RANGE_COLUMNS,
    NOISE_SCALE,
    NOISE_SCALE_COLUMNS,
    RUN_ENDED,
    RUN_STARTED,
    SKIPPED,
    SKIPPED_MESSAGE,
    STEP_COLUMNS,
    STEPS,
    SWEEP_ENDED,
    SWEEP_STARTED,
    now_iso,
)
from batchlab.core.paths import check_run_file
from batchlab.core.runfile.format import (
    FORMAT,
    FORMAT_VERSION,
    column_values,
    int_or,
    missing_value,
    run_group_name,
)
from batchlab.core.runfile.layout import (
    EPOCH_CHUNK,
    EVAL_CHUNK,
    GZIP_LEVEL,
    INTERRUPTED_MESSAGE,
    LOG_CHUNK,
    NX_TABLES,
    RESERVED_ROOT_ATTRS,
    TABLES,
    _append,
    _extra_attrs,
    _float_or_nan,
)
from batchlab.core.runfile.liveness import writer_identity

METRICS_GROUP = "metrics"  # per run: the model's compiled metrics per epoch (docs/runfile-format.md)
STEP_ROWS_FLUSH_SECONDS = 2.0  # step rows reach the disk at most this late (bench/bench_step_flush.py: the cost)


class RunFileWriter:
    """Writes one sweep's run file from the event stream; the parent process owns the only instance.

    Use as a context manager, or call ``close()``: runs still "running" when it closes are marked
    "interrupted", so a file never claims work is in progress once its writer is gone.
    """

    def __init__(
        self,
        path: str | Path,
        overwrite: bool = False,
        step_flush_s: float = STEP_ROWS_FLUSH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        leave_out: Iterable[str] = (),
    ):
        """`leave_out`: run tables (e.g. "steps") this file does not hold; their events are ignored (a
        summary-only export, docs/runfile-format.md)."""
        self.path = check_run_file(path, overwrite=overwrite)
        self._leave_out = frozenset(leave_out)
        self._step_flush_s, self._clock = step_flush_s, clock
        self._flushed_at = clock()  # core.paths: the CLI's and the window's rules
        # os.open first: it reports the OS reason plainly, and O_EXCL closes the race with another writer.
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
        try:
            os.close(os.open(self.path, flags, 0o666))
        except OSError as e:
            raise SpecError("out", f"cannot create {self.path}: {e.strerror or e}") from None
        try:
            # Default libver on purpose (see module docstring). No HDF5 file lock, so the GUI in this
            # same process can open the file read-only while we write (HDF5 refuses mixed lock flags).
            self._file: h5py.File | None = h5py.File(self.path, "w", locking=False, fs_strategy="none")
        except OSError as e:
            self.path.unlink(missing_ok=True)
            raise SpecError("out", f"cannot create {self.path} as an HDF5 file: {e}") from None
        created = now_iso()
        self._file.attrs.update(
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "created": created,
                "updated": created,
                "status": "running",
                "message": "",
                "app_version": __version__,
                "NX_class": "NXroot",
                **writer_identity(),
            }
        )
        # Open datasets, kept so their chunks stay cached until a flush (module docstring).
        self._columns: dict[tuple[int, str], dict[str, h5py.Dataset]] = {}
        self._log_dataset: h5py.Dataset | None = None
        self._handlers = {
            SWEEP_STARTED: self._sweep_started,
            RUN_STARTED: self._run_started,
            STEPS: self._steps,
            EPOCH_ENDED: self._epoch_ended,
            RUN_ENDED: self._run_ended,
            LOG: self._log,
            SWEEP_ENDED: self._sweep_ended,
            EVALUATION: self._evaluation,
            LR_RANGE: self._lr_range,
            NOISE_SCALE: self._noise_scale,
        }
        self._file.create_group("runs").attrs["NX_class"] = "NXcollection"
        self._log_dataset = self._create_log()
        self.flush()

    # ------------------------------------------------------------------ public

    @property
    def closed(self) -> bool:
        return self._file is None

    def handle(self, event: dict[str, Any]) -> None:
        """Record one event. Unknown event types are ignored, so newer producers work with this writer."""
        handler = self._handlers.get(event.get("type"))
        if handler is not None:
            handler(event)

    def flush(self) -> None:
        """Stamp `updated` and push everything to disk, so readers and a later crash see it."""
        f = self._open_file()
        f.attrs["updated"] = now_iso()
        f.flush()
        self._flushed_at = self._clock()

    def close(self) -> None:
        """Mark unfinished work interrupted, flush and close. Safe to call twice."""
        if self._file is None:
            return
        f = self._file
        ended = now_iso()
        for group in f.get("runs", {}).values():
            if group.attrs.get("status") == "running":
                group.attrs.update({"status": "interrupted", "message": INTERRUPTED_MESSAGE, "ended": ended})
        if f.attrs.get("status") == "running":
            f.attrs.update(
                {"status": "interrupted", "message": "the run file was closed before the sweep ended", "ended": ended}
            )
        self.flush()
        self._columns.clear()
        self._log_dataset = None
        f.close()
        self._file = None

    def __enter__(self) -> RunFileWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers

    def _open_file(self) -> h5py.File:
        if self._file is None:
            raise RuntimeError(f"run file {self.path} is already closed")
        return self._file

    def _run_group(self, index: int, batch_size: Any = None, seed: Any = None) -> h5py.Group:
        """The run's group, created as "pending" if the sweep's plan did not list it."""
        runs = self._open_file().require_group("runs")
        name = run_group_name(index)
        if name not in runs:
            group = runs.create_group(name)
            group.attrs.update(
                {
                    "NX_class": "NXentry",
                    "index": index,
                    "batch_size": int_or(batch_size),
                    "seed": int_or(seed),
                    "status": "pending",
                    "message": "",
                }
            )
        return runs[name]

    def _table(self, index: int, name: str) -> dict[str, h5py.Dataset]:
        """The open datasets of a run's steps/, epochs/ or evals/ group, created on first use."""
        key = (index, name)
        if key in self._columns:
            return self._columns[key]
        columns, chunk = TABLES[name]
        group = self._run_group(index)
        if name not in group:
            table = group.create_group(name)
            signal, axes = NX_TABLES[name]
            table.attrs.update({"NX_class": "NXdata", "signal": signal, "axes": axes})
            table.attrs["columns"] = np.array([c.name for c in columns], dtype=h5py.string_dtype("utf-8"))
            # what a NeXus viewer plots when the run is opened
            group.attrs["default"] = "epochs" if "steps" in self._leave_out else "steps"
            for c in columns:
                ds = table.create_dataset(
                    c.name,
                    shape=(0,),
                    maxshape=(None,),
                    dtype=c.dtype,
                    chunks=(chunk,),
                    compression="gzip",
                    compression_opts=GZIP_LEVEL,
                    shuffle=True,
                    fillvalue=missing_value(c.dtype),
                )
                ds.attrs["units"] = c.units
                ds.attrs["long_name"] = c.long_name
        self._columns[key] = {c.name: group[name][c.name] for c in columns}
        return self._columns[key]

    def _release(self, index: int) -> None:
        """Close a finished run's datasets; call only right after a flush, when their chunks are clean."""
        self._columns.pop((index, "steps"), None)
        self._columns.pop((index, "epochs"), None)
        self._columns.pop((index, "evals"), None)
        self._columns.pop((index, "lr_range"), None)
        self._columns.pop((index, "noise_scale"), None)

    def _event_run(self, event: dict[str, Any]) -> int | None:
        """The run index an event names, making sure its group exists; None (and a log line) if it names none."""
        index = event.get("run")
        if index is None:
            self._write_log("warning", f"ignored a {event.get('type')} event that names no run")
            return None
        self._run_group(int(index))
        return int(index)

    def _create_log(self) -> h5py.Dataset:
        """The /log dataset, empty until the first message (it always exists, see docs/runfile-format.md)."""
        ds = self._open_file().create_dataset(
            "log", shape=(0,), maxshape=(None,), dtype=h5py.string_dtype("utf-8"), chunks=(LOG_CHUNK,)
        )
        ds.attrs["units"] = ""
        ds.attrs["long_name"] = "sweep log, one line per message: ISO time, level, [run N], message"
        return ds

    def _write_log(self, level: str, message: str, run: Any = None, time: str | None = None) -> None:
        if self._log_dataset is None:
            raise RuntimeError(f"run file {self.path} is already closed")
        where = f" [run {run}]" if run is not None else ""
        line = f"{time or now_iso()} {level}{where} {message}"
        _append(self._log_dataset, np.array([line], dtype=object))
        if level in ("warning", "error"):
            self.flush()

    # ------------------------------------------------------------------ event handlers

    def _sweep_started(self, event: dict[str, Any]) -> None:
        f = self._open_file()
        environment = event.get("environment") or {}
        f.attrs["spec"] = json.dumps(event.get("spec") or {}, sort_keys=True, default=str)
        f.attrs["environment"] = json.dumps(environment, sort_keys=True, default=str)
        f.attrs["started"] = str(event.get("started") or now_iso())
        if event.get("mode"):  # "lr_find": a range-test file (only then written, so sweep files are unchanged)
            f.attrs["mode"] = str(event["mode"])
        for key, value in (event.get("export") or {}).items():  # an export's provenance (core/export/hdf5.py)
            if key not in RESERVED_ROOT_ATTRS:
                f.attrs[key] = value
        for key, value in environment.items():
            if isinstance(value, str) and key not in RESERVED_ROOT_ATTRS:
                f.attrs[key] = value
        for key, value in (event.get("root_attrs") or {}).items():  # e.g. batchlab bench: its suite and machine
            if key not in RESERVED_ROOT_ATTRS and isinstance(value, (str, int, float)) and not isinstance(value, bool):
                f.attrs[key] = value
        f.require_group("runs")
        for run in event.get("runs") or []:
            self._run_group(int(run["index"]), run.get("batch_size"), run.get("seed"))
        self.flush()

    def _run_started(self, event: dict[str, Any]) -> None:
        index = self._event_run(event)
        if index is None:
            return
        attrs = self._run_group(index).attrs
        for key in ("batch_size", "seed", "nice"):
            if event.get(key) is not None:
                attrs[key] = int_or(event[key])
        attrs.update(
            {
                "status": "running",
                "message": "",
                "pid": int_or(event.get("pid")),
                "device": str(event.get("device") or ""),
                "steps_per_epoch": int_or(event.get("steps_per_epoch")),
                "epochs": int_or(event.get("epochs")),
                "samples": int_or(event.get("samples")),
                "started": str(event.get("started") or now_iso()),
            }
        )
        attrs.update(_extra_attrs(event))
        for name in ("steps", "epochs"):
            if name not in self._leave_out:
                self._table(index, name)
        self.flush()

    def _steps(self, event: dict[str, Any]) -> None:
        index = self._event_run(event)
        if index is None or "steps" in self._leave_out:
            return
        n = max((len(event[c.name]) for c in STEP_COLUMNS if event.get(c.name) is not None), default=0)
        if n == 0:
            return
        steps = self._table(index, "steps")
        for c in STEP_COLUMNS:
            _append(steps[c.name], column_values(c, event.get(c.name), n))
        # Steps arrive several times a second: flushed at most every step_flush_s (and at every epoch's end),
        # so a reader following the file sees them within that, and a kill loses no more.
        if self._clock() - self._flushed_at >= self._step_flush_s:
            self.flush()

    def _epoch_ended(self, event: dict[str, Any]) -> None:
        index = self._event_run(event)
        if index is None:
            return
        epochs = self._table(index, "epochs")
        for c in EPOCH_COLUMNS:
            _append(epochs[c.name], column_values(c, [event.get(c.name)], 1))
        if event.get("metrics"):
            self._metrics(index, event["metrics"], rows=epochs[EPOCH_COLUMNS[0].name].shape[0])
        self.flush()

    def _evaluation(self, event: dict[str, Any]) -> None:
        index = self._event_run(event)
        if index is None:
            return
        evals = self._table(index, "evals")
        for c in EVAL_COLUMNS:
            _append(evals[c.name], column_values(c, [event.get(c.name)], 1))
        self._eval_metrics(index, event.get("metrics") or {}, rows=evals[EVAL_COLUMNS[0].name].shape[0])
        self.flush()  # evaluations are seldom (every eval_every steps at most) and are what a target run is for

    def _lr_range(self, event: dict[str, Any]) -> None:
        index = self._event_run(event)
        if index is None:
            return
        n = max((len(event[c.name]) for c in LR_RANGE_COLUMNS if event.get(c.name) is not None), default=0)
        if n == 0:
            return
        table = self._table(index, "lr_range")
        for c in LR_RANGE_COLUMNS:
            _append(table[c.name], column_values(c, event.get(c.name), n))
        self.flush()  # a range test sends its points a few times per run: each batch is what it measured

    def _noise_scale(self, event: dict[str, Any]) -> None:
        index = self._event_run(event)
        if index is None:
            return
        n = max((len(event[c.name]) for c in NOISE_SCALE_COLUMNS if event.get(c.name) is not None), default=0)
        if n == 0:
            return
        table = self._table(index, "noise_scale")
        for c in NOISE_SCALE_COLUMNS:
            _append(table[c.name], column_values(c, event.get(c.name), n))
        # No flush: they come with the steps; the epoch_ended flush covers both.

    def _eval_metrics(self, index: int, metrics: dict[str, Any], rows: int) -> None:
        """The model's other compiled metrics at an evaluation (val_mae, ...): one float64 column each in
        the run's evals/ group, NaN in the rows that lack it (an evaluation without validation)."""
        group = self._run_group(index)["evals"]
        for name, value in metrics.items():
            name = str(name).replace("/", "_")
            if name in group and name in EVAL_COLUMN_NAMES:
                continue  # never overwrite a fixed column
            if name not in group:
                ds = group.create_dataset(
                    name, shape=(0,), maxshape=(None,), dtype="float64", chunks=(EVAL_CHUNK,), fillvalue=math.nan
                )
                ds.attrs["units"] = ""
                ds.attrs["long_name"] = f"the model's {name.partition('_')[2] or name} metric on the validation data"
                columns = [str(c) for c in group.attrs["columns"]]
                group.attrs["columns"] = np.array([*columns, name], dtype=h5py.string_dtype("utf-8"))
            ds = group[name]
            ds.resize((rows,))
            ds[rows - 1] = _float_or_nan(value)
        for name, ds in group.items():
            if name not in EVAL_COLUMN_NAMES and ds.shape[0] < rows:
                ds.resize((rows,))

    def _metrics(self, index: int, metrics: dict[str, Any], rows: int) -> None:
        """The model's compiled metrics, one dataset per name (train_NAME, val_NAME) in the run's
        metrics/ group, one value per epoch row; a metric missing from an epoch reads NaN there."""
        group = self._run_group(index).require_group(METRICS_GROUP)
        if "NX_class" not in group.attrs:
            group.attrs.update({"NX_class": "NXdata", "axes": "epoch"})
        for name, value in metrics.items():
            name = str(name).replace("/", "_")
            if name not in group:
                ds = group.create_dataset(
                    name, shape=(0,), maxshape=(None,), dtype="float64", chunks=(EPOCH_CHUNK,), fillvalue=math.nan
                )
                split, _, metric = name.partition("_")
                data = {"train": "training data (mean over the epoch's batches)", "val": "validation data"}
                ds.attrs["units"] = ""
                ds.attrs["long_name"] = f"the model's {metric or name} metric on the {data.get(split, split)}"
            ds = group[name]
            ds.resize((rows,))  # a metric that appears late is NaN for the epochs before
            ds[rows - 1] = _float_or_nan(value)
        for ds in group.values():
            if ds.shape[0] < rows:  # a metric this epoch lacks (no validation) is NaN for it
                ds.resize((rows,))

    def _run_ended(self, event: dict[str, Any]) -> None:
        index = self._event_run(event)
        if index is None:
            return
        self._run_group(index).attrs.update(
            {
                "status": str(event.get("status") or "error"),
                "message": str(event.get("message") or ""),
                "ended": str(event.get("ended") or now_iso()),
                "final_loss": _float_or_nan(event.get("final_loss")),
                "total_time": _float_or_nan(event.get("total_time")),
                "samples_per_s": _float_or_nan(event.get("samples_per_s")),
                **_extra_attrs(event),
            }
        )
        self.flush()
        self._release(index)

    def _log(self, event: dict[str, Any]) -> None:
        self._write_log(
            str(event.get("level") or "info"), str(event.get("message") or ""), event.get("run"), event.get("time")
        )

    def _sweep_ended(self, event: dict[str, Any]) -> None:
        f = self._open_file()
        ended = str(event.get("ended") or now_iso())
        for group in f.get("runs", {}).values():
            if group.attrs.get("status") == "pending":  # never started: Stop, Ctrl-C or a failure came first
                group.attrs.update({"status": SKIPPED, "message": SKIPPED_MESSAGE})
        f.attrs.update(
            {
                "status": str(event.get("status") or "failed"),
                "message": str(event.get("message") or ""),
                "ended": ended,
            }
        )
        self.flush()
