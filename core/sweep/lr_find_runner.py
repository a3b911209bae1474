"""`batchlab lr-find`, the parent side: one LR range test per run of a spec, each in its own child.

A use of the sweep's scheduler and launcher (core/sweep/runner.py) with another child entry
(child.lr_find_main) and mode lr_find, so a range test gets the same preflight, stop, crash handling and one
writer as a sweep. Kept apart from core/sweep/lr_find.py (which the spec reads suggestions with), so reading
a file's suggestions never imports the scheduler.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from batchlab.core.lr_range import RangeSettings
from batchlab.core.spec import RunSpec, SweepSpec
from batchlab.core.sweep.lr_find import LR_FIND_MODE
from batchlab.core.sweep.runner import Sink, SweepRunner, run_sweep
from batchlab.core.training.child import lr_find_main


class LrFindRunner(SweepRunner):
    """The sweep's scheduler and launcher with another child entry (child.lr_find_main) and mode lr_find."""

    def __init__(
        self,
        spec: SweepSpec,
        settings: RangeSettings,
        log_dir: str | os.PathLike | None = None,
        niceness: int = 0,
    ):
        def entry(run: RunSpec) -> tuple[Callable, tuple]:
            return lr_find_main, (run.to_dict(), settings.to_dict())

        super().__init__(spec, log_dir=log_dir, niceness=niceness, entry=entry, mode=LR_FIND_MODE)
        self.settings = settings


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
