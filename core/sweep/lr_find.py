"""`batchlab lr-find`, the parent side: one LR range test per run of a spec, each in its own child.

The runner is the sweep's (core/sweep/runner.py) with another child entry (child.lr_find_main), so a
range test gets the same preflight, stop, crash handling and one writer as a sweep. Its run file is a
sweep file with root attribute ``mode = "lr_find"`` and an ``lr_range/`` table per run
(docs/runfile-format.md). `suggested_rates` reads the suggestions back for a sweep's ``lr_from``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from batchlab.core.lr_range import LR_FIND_MODE, RangeSettings, range_rows, suggested_rates  # noqa: F401 (read here)
from batchlab.core.spec import RunSpec, SweepSpec
from batchlab.core.sweep.runner import Sink, SweepRunner, run_sweep
from batchlab.core.training.child import lr_find_main


class LrFindRunner(SweepRunner):
    """A SweepRunner whose children run range tests instead of training runs."""

    def __init__(self, spec: SweepSpec, settings: RangeSettings, log_dir: str | os.PathLike | None = None):
        super().__init__(spec, log_dir=log_dir)
        self.settings = settings

    def sweep_fields(self) -> dict[str, Any]:
        return {"mode": LR_FIND_MODE}

    def _child_entry(self, run: RunSpec) -> tuple[Callable, tuple]:
        return lr_find_main, (run.to_dict(), self.settings.to_dict())


def run_lr_find(
    spec: SweepSpec,
    settings: RangeSettings,
    out_path: str | os.PathLike,
    sink: Sink | None = None,
    overwrite: bool = False,
    runner: LrFindRunner | None = None,
    on_preflight: Callable[[], None] | None = None,
) -> str:
    """Run the range test for every run of `spec` and write its run file; returns the sweep status."""
    runner = runner or LrFindRunner(spec, settings)
    return run_sweep(spec, out_path, sink=sink, overwrite=overwrite, runner=runner, on_preflight=on_preflight)


def format_range_table(rows: list[dict[str, Any]]) -> str:
    """The lr-find table: batch size, suggested lr (steepest), min/10, smoothed loss there, why it stopped."""

    def num(v: float) -> str:
        return f"{v:.3g}" if math.isfinite(v) else "—"

    seeds = len({r["seed"] for r in rows}) > 1
    header = ["batch"] + (["seed"] if seeds else []) + ["suggested lr", "min/10", "loss there", "steps", "stopped"]
    lines = [header]
    for r in rows:
        stop = r["stop_reason"] if r["status"] == "ok" else f"{r['status']}: {r['stop_reason'] or '-'}"
        lines.append(
            [str(r["batch_size"])]
            + ([str(r["seed"])] if seeds else [])
            + [num(r["suggested_lr"]), num(r["suggested_lr_min10"]), num(r["loss_at_suggestion"])]
            + [str(r["points"]), stop]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    last = len(header) - 1  # the stop reason: left-aligned, free width
    out = []
    for line in lines:
        cells = [c if i == last else c.rjust(widths[i]) for i, c in enumerate(line)]
        out.append("  ".join(cells))
    return "\n".join(out)
