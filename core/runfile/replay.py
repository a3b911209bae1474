"""A run read from a file, as the events that wrote it: copying runs goes through the one writer.

`batchlab export` (core/export/hdf5.py) feeds these events to RunFileWriter, so an exported file has
exactly the layout, dtypes, units and tags of a sweep's file (docs/runfile-format.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from batchlab.core.events import (
    EPOCH_COLUMN_NAMES,
    EPOCH_ENDED,
    EVAL_COLUMN_NAMES,
    EVALUATION,
    LOG,
    LR_RANGE,
    NOISE_SCALE,
    RUN_ENDED,
    RUN_STARTED,
    STEPS,
    make_event,
)
from batchlab.core.runfile.reader import RunRecord

# Run attributes a run_ended event carries (the writer sets them at the run's end); the rest go with run_started.
END_ATTRS = ("status", "message", "ended", "final_loss", "total_time", "samples_per_s")
_WRITER_ATTRS = frozenset(("NX_class", "default", "index"))  # the writer sets these itself
_LOG_LINE = re.compile(r"^(?P<time>\S+) (?P<level>\w+)(?: \[run (?P<run>\d+)\])? (?P<message>.*)$", re.DOTALL)


def run_events(run: RunRecord, index: int, extra: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """The events that write `run` as run `index` of a new file, its attributes plus `extra` included.

    A run whose training never started (no `started` attribute) gets no run_started: it stays as planned
    (the writer's sweep_ended then marks it skipped) unless its file gave it another status.
    """
    attrs = {k: v for k, v in run.attrs.items() if k not in _WRITER_ATTRS}
    started = {k: v for k, v in attrs.items() if k not in END_ATTRS}
    started.update(extra or {})
    if "started" in run.attrs:
        yield make_event(RUN_STARTED, **{**started, "run": index})
        if run.steps:
            yield make_event(STEPS, run=index, **run.steps)
        yield from _epoch_events(run, index)
        for row in _rows(run.evals):
            metrics = {k: v for k, v in row.items() if k not in EVAL_COLUMN_NAMES}
            yield make_event(EVALUATION, run=index, metrics=metrics, **{k: row[k] for k in row if k not in metrics})
        if run.noise_scale:
            yield make_event(NOISE_SCALE, run=index, **run.noise_scale)
        if run.lr_range:
            yield make_event(LR_RANGE, run=index, **run.lr_range)
    if run.status not in ("pending", "running", "skipped") or "started" not in run.attrs:
        if run.status != "pending":
            ended = {k: attrs[k] for k in END_ATTRS if k in attrs}
            extra_end = {} if "started" in run.attrs else started  # a run that never started keeps its attributes
            yield make_event(RUN_ENDED, **{**extra_end, **ended, "run": index})


def _epoch_events(run: RunRecord, index: int) -> Iterator[dict[str, Any]]:
    for i, row in enumerate(_rows(run.epochs)):
        metrics = {name: values[i] for name, values in run.metrics.items() if i < len(values)}
        fields = {k: v for k, v in row.items() if k in EPOCH_COLUMN_NAMES}
        yield make_event(EPOCH_ENDED, run=index, metrics=metrics, **fields)


def _rows(table: Mapping[str, np.ndarray]) -> Iterator[dict[str, Any]]:
    n = min((len(v) for v in table.values()), default=0)
    for i in range(n):
        yield {name: _plain(values[i]) for name, values in table.items()}


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def log_events(lines: list[str], runs: Mapping[int, int]) -> Iterator[dict[str, Any]]:
    """The file's log lines as log events: lines about one run keep it under its new index (`runs`: old -> new);
    lines about runs not copied are left out. A line the pattern does not match is kept whole, as info."""
    for line in lines:
        match = _LOG_LINE.match(str(line))
        if match is None:
            yield make_event(LOG, level="info", message=str(line), run=None)
            continue
        run = match["run"]
        if run is not None and int(run) not in runs:
            continue
        new = runs[int(run)] if run is not None else None
        yield make_event(LOG, level=match["level"], message=match["message"], run=new, time=match["time"])
