"""The run_ended event's reference figures, made by the rules every view uses (core/figures.py).

The training child reports its own ``samples_per_s`` at a run's end; the parent replaces it, before
the run file's one writer records it, with the run's steady throughput as core.figures computes it
from the same step rows, so the file's run attribute, the runs table, the Summary, the CSV and
`batchlab report` give one number under one name (docs/runfile-format.md, *Figures*).
numpy only.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from batchlab.core.events import EPOCH_ENDED, RUN_ENDED, STEPS
from batchlab.core.figures import steady_throughput

# The step and epoch columns steady_throughput reads (step durations, tracing, batch sizes).
STEP_KEYS = ("step", "epoch", "wall_time", "fetch_time", "step_time", "batch_size", "traced")
EPOCH_KEYS = ("epoch", "wall_time")


class RunEndFigures:
    """Called with every event before the writer sees it; sets run_ended's ``samples_per_s`` (samples/s)."""

    def __init__(self) -> None:
        self._steps: dict[int, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        self._epochs: dict[int, dict[str, list]] = defaultdict(lambda: defaultdict(list))

    def __call__(self, event: dict[str, Any]) -> None:
        kind, run = event.get("type"), event.get("run")
        if run is None:
            return
        if kind == STEPS:
            step = event.get("step")
            rows = 0 if step is None else len(step)
            for key in STEP_KEYS:
                values = event.get(key)
                # a column the producer does not send (an older child) stays out, so figures see it as absent
                if values is not None and len(values) == rows:
                    self._steps[run][key].append(np.asarray(values, dtype=np.float64))  # 8 bytes a value
        elif kind == EPOCH_ENDED:
            for key in EPOCH_KEYS:
                self._epochs[run][key].append(event.get(key, np.nan))
        elif kind == RUN_ENDED:
            steps = {k: np.concatenate(v) for k, v in self._steps.pop(run, {}).items()}
            epochs = {k: np.asarray(v, dtype=np.float64) for k, v in self._epochs.pop(run, {}).items()}
            if steps.get("step") is not None and len(steps["step"]):
                event["samples_per_s"] = steady_throughput(steps, epochs)
