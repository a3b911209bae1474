"""`batchlab export --tensorboard DIR FILE.h5`: chosen runs as TensorBoard event files, one folder per run.

Written with TensorBoard's own record writer and protobufs (tensorboard.summary.writer.record_writer,
tensorboard.compat.proto, tensorboard.plugins.hparams.summary_v2), none of which imports TensorFlow, so the parent
process stays free of it (STYLE.md, tests/core/test_architecture.py). TensorBoard's EventFileWriter is not used:
it opens files through tf.io.gfile, which imports TensorFlow whenever it is installed; _EventFile is the same file
(name, first `file_version` event, records) over a plain Python file. `tensorboard` is an optional extra
(pip install 'batchlab[tensorboard]'). The tags and what they hold are listed in TAGS and in docs/sharing.md.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from batchlab.core.errors import SpecError
from batchlab.core.events import EPOCH_COLUMN_NAMES
from batchlab.core.export.select import Selection, read_sources, select_runs
from batchlab.core.paths import user_path
from batchlab.core.runfile.reader import RunRecord, SweepRecord

INSTALL_HINT = "--tensorboard needs the tensorboard package: pip install 'batchlab[tensorboard]' (or tensorboard)"
EVENT_FILE_GLOB = "events.out.tfevents.*"
# tag -> what it holds (docs/sharing.md); the x axis (TensorBoard's step) is given after the colon.
TAGS = {
    "loss/by_step": "the training loss of each mini-batch (before its update): optimizer step",
    "loss/by_examples": "the same losses: training examples seen after the step",
    "lr/by_step": "the learning rate applied in the step: optimizer step",
    "step/step_time_s": "the step's device-synchronised compute time (s): optimizer step",
    "epoch/NAME": "each epochs/ column (train_loss, val_loss, epoch_time, samples_per_s, ...): epoch",
    "memory/NAME": "the epoch's peak memory in bytes (rss_peak_bytes, tf_peak_bytes, device_memory_bytes): epoch",
    "metrics/NAME": "the model's compiled metrics (train_NAME, val_NAME): epoch",
    "eval/NAME": "each evaluation point's evals/ column (val_loss, val_accuracy, ...): optimizer steps before it",
    "noise_scale/b_simple": "the gradient noise scale B_simple (samples): optimizer step",
    "summary/NAME": "the run's figures as batchlab report shows them (final_loss, time_to_target_s, ...): 0",
}
MEMORY_COLUMNS = ("rss_peak_bytes", "tf_peak_bytes", "device_memory_bytes")
EPOCH_SKIPPED = ("epoch", "wall_time", *MEMORY_COLUMNS)  # the axis, the clock, and memory (under memory/)
# The run figures the HParams table shows as metrics: tag -> RunFigures field.
SUMMARY_FIGURES = {
    "summary/final_loss": "final_loss",
    "summary/time_to_target_s": "time_to_target",
    "summary/steady_samples_per_s": "samples_per_s",
    "summary/total_time_s": "total_time",
    "summary/peak_memory_bytes": "peak_memory_bytes",
    "summary/steps_to_target": "steps_to_target",
}


@dataclass(frozen=True)
class TensorBoardResult:
    path: Path
    runs: int
    folders: tuple[str, ...]


def _tensorboard():
    """TensorBoard's TF-free writer parts; SpecError with the install line when the package is missing."""
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.hparams import summary_v2
        from tensorboard.summary.writer.record_writer import RecordWriter
    except ImportError:
        raise SpecError("tensorboard", INSTALL_HINT) from None
    return event_pb2, summary_pb2, summary_v2, RecordWriter


class _EventFile:
    """One TensorBoard event file in `folder`, named and started as TensorBoard's EventFileWriter does."""

    _count = itertools.count()

    def __init__(self, folder: Path, event_pb2, record_writer):
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{next(self._count)}"
        self.path = folder / name
        self._file = open(self.path, "wb")
        self._records = record_writer(self._file)
        self.add(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def add(self, event) -> None:
        self._records.write(event.SerializeToString())

    def close(self) -> None:
        self._file.close()


def export_tensorboard(
    out: str | Path, paths: list[str | Path], selection: Selection | None = None, overwrite: bool = False
) -> TensorBoardResult:
    """Write the chosen runs of `paths` as TensorBoard event files under the folder `out`, one subfolder per run
    (e.g. batch_00032_seed_0), and the HParams table's configuration at its top. SpecError (one line) for a bad
    source, a selection matching nothing, a folder that cannot be used, or run folders holding event files
    already (without `overwrite`)."""
    tb = _tensorboard()
    records = read_sources(paths)
    chosen = select_runs(records, selection or Selection())
    root = _prepare_root(out)
    names = _folder_names(chosen, several_files=len({id(r) for r, _ in chosen}) > 1)
    for name in names:
        _clear(root / name, overwrite)
    _clear(root, overwrite, what="the HParams configuration")
    hparams = _hparam_domains(chosen, tb[2])
    try:
        _write_config(root, hparams, tb)
        for name, (record, run) in zip(names, chosen, strict=True):
            _write_run(root / name, name, record, run, hparams, tb)
    except OSError as e:  # a full disk, a folder without write permission
        raise SpecError("tensorboard", f"cannot write the event files under {out}: {e.strerror or e}") from None
    return TensorBoardResult(root, len(chosen), tuple(names))


def _prepare_root(out: str | Path) -> Path:
    root = user_path(out)
    if root.exists() and not root.is_dir():
        raise SpecError("tensorboard", f"{out} is a file; name a folder for the event files")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpecError("tensorboard", f"cannot create folder {out}: {e.strerror or e}") from None
    return root


def _clear(folder: Path, overwrite: bool, what: str = "") -> None:
    """Refuse (or, with overwrite, remove) the event files a folder already holds; nothing else is touched."""
    old = sorted(folder.glob(EVENT_FILE_GLOB)) if folder.is_dir() else []
    if old and not overwrite:
        label = what or f"run {folder.name}"
        message = f"{folder} already holds event files ({label}); pass --overwrite to replace them"
        raise SpecError("tensorboard", message)
    for path in old:
        path.unlink()


def _folder_names(chosen: list[tuple[SweepRecord, RunRecord]], several_files: bool) -> list[str]:
    """One folder per run named by batch size and seed (zero-padded, so TensorBoard lists them in order); the
    source file's name first when runs come from several files, the run index where a name repeats."""
    base = []
    for record, run in chosen:
        name = f"batch_{run.batch_size:05d}_seed_{run.seed}"
        if several_files:
            name = f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', Path(str(record.path)).stem)}/{name}"
        base.append(name)
    return [n if base.count(n) == 1 else f"{n}_run_{run.index:03d}" for n, (_, run) in zip(base, chosen, strict=True)]


def _start_time(run: RunRecord, record: SweepRecord) -> float:
    """The run's start (s since the Unix epoch), from its ISO `started`; the sweep's, else now."""
    for text in (run.attrs.get("started"), record.attrs.get("started")):
        try:
            return datetime.fromisoformat(str(text)).timestamp()
        except (TypeError, ValueError):
            continue
    return time.time()


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(float(value))


Series = tuple[str, np.ndarray, np.ndarray, np.ndarray]  # tag, steps (int64), values, wall times (s since the epoch)


def _series(tag: str, steps: Any, values: Any, walls: Any, start: float, missing: float = math.nan) -> list[Series]:
    """One tag's points with a finite value and step (an integer column's missing value, -1, left out too);
    a wall time that is not finite counts as the run's start. Empty when no point is left."""
    values = np.asarray(values, dtype=np.float64)
    steps = np.asarray(steps, dtype=np.float64)
    walls = np.broadcast_to(np.asarray(walls, dtype=np.float64), values.shape)
    n = min(len(steps), len(values), len(walls))
    steps, values, walls = steps[:n], values[:n], walls[:n]
    keep = np.isfinite(values) & np.isfinite(steps) & (values != missing)
    if not keep.any():
        return []
    return [(tag, steps[keep].astype(np.int64), values[keep], start + np.where(np.isfinite(walls), walls, 0.0)[keep])]


def run_scalars(run: RunRecord, start: float) -> list[Series]:
    """Every scalar series of one run (wall times in s since the epoch); TAGS says what each tag holds."""
    out: list[Series] = []
    steps = run.steps
    if len(steps.get("step", ())):
        step, wall = steps["step"], steps["wall_time"]
        out += _series("loss/by_step", step, steps["loss"], wall, start)
        examples = np.cumsum(np.maximum(steps.get("batch_size", np.zeros(len(step))), 0))
        out += _series("loss/by_examples", examples, steps["loss"], wall, start)
        if "lr" in steps:
            out += _series("lr/by_step", step, steps["lr"], wall, start)
        if "step_time" in steps:
            out += _series("step/step_time_s", step, steps["step_time"], wall, start)
    epochs = run.epochs
    if len(epochs.get("epoch", ())):
        epoch, wall = epochs["epoch"], epochs.get("wall_time", math.nan)
        for name in EPOCH_COLUMN_NAMES:
            if name in epochs and name not in EPOCH_SKIPPED:
                out += _series(f"epoch/{name}", epoch, epochs[name], wall, start)
        for name in MEMORY_COLUMNS:
            if name in epochs:
                out += _series(f"memory/{name}", epoch, epochs[name], wall, start, missing=-1)
        for name, values in sorted(run.metrics.items()):
            out += _series(f"metrics/{name}", epoch, values, wall, start)
    evals = run.evals
    if len(evals.get("steps", ())):
        for name, values in evals.items():
            if name not in ("steps", "wall_time", "at_epoch_end"):
                out += _series(f"eval/{name}", evals["steps"], values, evals["wall_time"], start)
    noise = run.noise_scale
    if len(noise.get("step", ())):
        out += _series("noise_scale/b_simple", noise["step"], noise["b_simple"], math.nan, start)
    figures = run.figures.as_dict()
    for tag, field in SUMMARY_FIGURES.items():
        out += _series(tag, [0], [figures[field]], [figures["total_time"]], start, missing=-1)
    return out


def _events(series: list[Series]) -> Iterator[tuple[int, float, list[tuple[str, float]]]]:
    """(step, wall time, [(tag, value), ...]) in step order: points of one step and wall time (a step's loss, rate
    and step time) share one event. In step order across tags, since TensorBoard's --inspect lists a step lower
    than one before it as out of order (the tags have their own x axes: steps, examples, epochs)."""
    if not series:
        return
    tags = [tag for tag, *_ in series]
    which = np.concatenate([np.full(len(s[1]), i) for i, s in enumerate(series)])
    steps, values, walls = (np.concatenate([s[k] for s in series]) for k in (1, 2, 3))
    order = np.lexsort((which, walls, steps))
    current: tuple[int, float] | None = None
    points: list[tuple[str, float]] = []
    for i, step, wall, value in zip(
        which[order].tolist(), steps[order].tolist(), walls[order].tolist(), values[order].tolist(), strict=True
    ):
        if (step, wall) != current:
            if points:
                yield current[0], current[1], points
            current, points = (step, wall), []
        points.append((tags[i], value))
    yield current[0], current[1], points


def run_hparams(run: RunRecord, record: SweepRecord) -> dict[str, Any]:
    """The run's hyperparameters for the HParams table: its own attributes, else the sweep's settings."""
    spec, attrs = record.spec, run.attrs
    lr = attrs.get("lr_peak", attrs.get("lr", spec.get("lr")))
    values = {
        "batch_size": int(run.batch_size),
        "seed": int(run.seed),
        "lr": float(lr) if _finite(lr) else "default",
        "lr_rule": str(attrs.get("lr_rule") or spec.get("lr_rule") or "constant"),
        "lr_schedule": str(attrs.get("lr_schedule") or spec.get("lr_schedule") or "constant"),
        "optimizer": str(spec.get("optimizer") or attrs.get("optimizer") or "default"),
        "workload": str(spec.get("preset") or spec.get("workload") or spec.get("model_file") or ""),
        "status": run.status,
    }
    return values


def _hparam_domains(chosen: list[tuple[SweepRecord, RunRecord]], summary_v2) -> dict[str, Any]:
    """name -> HParam with the values the runs take (a discrete domain), so the table can filter by them."""
    seen: dict[str, list[Any]] = {}
    for record, run in chosen:
        for name, value in run_hparams(run, record).items():
            seen.setdefault(name, [])
            if value not in seen[name]:
                seen[name].append(value)
    domains = {}
    for name, values in seen.items():
        same_kind = len({type(v) for v in values}) == 1
        domain = summary_v2.Discrete(sorted(values)) if same_kind else None
        domains[name] = summary_v2.HParam(name, domain)
    return domains


def _write_config(root: Path, hparams: dict[str, Any], tb) -> None:
    event_pb2, _, summary_v2, record_writer = tb
    metrics = [summary_v2.Metric(tag, display_name=tag.partition("/")[2]) for tag in SUMMARY_FIGURES]
    config = summary_v2.hparams_config_pb(hparams=list(hparams.values()), metrics=metrics)
    writer = _EventFile(root, event_pb2, record_writer)
    writer.add(event_pb2.Event(wall_time=time.time(), step=0, summary=config))
    writer.close()


def _write_run(folder: Path, name: str, record: SweepRecord, run: RunRecord, hparams: dict[str, Any], tb) -> None:
    event_pb2, summary_pb2, summary_v2, record_writer = tb
    start = _start_time(run, record)
    folder.mkdir(parents=True, exist_ok=True)
    writer = _EventFile(folder, event_pb2, record_writer)
    try:
        values = {hparams[k]: v for k, v in run_hparams(run, record).items()}
        session = summary_v2.hparams_pb(values, trial_id=name, start_time_secs=start)
        writer.add(event_pb2.Event(wall_time=start, step=0, summary=session))
        value = summary_pb2.Summary.Value
        for step, wall, points in _events(run_scalars(run, start)):
            summary = summary_pb2.Summary(value=[value(tag=tag, simple_value=v) for tag, v in points])
            writer.add(event_pb2.Event(wall_time=wall, step=step, summary=summary))
    finally:
        writer.close()
