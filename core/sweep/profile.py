"""`batchlab profile`, the parent side: a short run per batch size measuring noise scale and step time.

A use of the sweep's scheduler (core/sweep/runner.py) with mode ``profile`` (core/analysis/predict.py reads
its file); here are the settings a profile trains with, worked out from the user's. The scheduler is imported
only when a profile runs, so `batchlab --help` stays light.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from batchlab.core.errors import SpecError
from batchlab.core.spec import SweepSpec, build_spec, preset_values

if TYPE_CHECKING:
    from batchlab.core.sweep.runner import Sink, SweepRunner

PROFILE_STEPS = 200  # optimizer steps per batch size a profile trains unless a budget is given
PROFILE_NOISE_EVERY = 5  # steps between its noise-scale measurements unless --noise-scale-every is given
PROFILE_BATCHES = 3  # batch sizes a profile picks from the preset's list (smallest, middle, largest)


def profile_values(values: dict[str, Any], steps: Any = None) -> dict[str, Any]:
    """The sweep a profile runs from the user's settings `values` (None: not given): a steps budget (`steps`, or
    PROFILE_STEPS past any warmup), noise scale on, no target, and up to PROFILE_BATCHES of the preset's sizes."""
    values = dict(values)
    values.update(budget_unit="steps", epochs=steps if steps is not None else PROFILE_STEPS)
    values.update(target="", eval_every="")  # a profile predicts the time to target; it does not train to it
    if values.get("noise_scale_every") is None:
        values["noise_scale_every"] = PROFILE_NOISE_EVERY
    if values.get("batch_sizes") is None:  # the preset's, those a measurement can split into its parts
        preset = preset_values(values, blank_means_default=True)
        parts = preset["noise_scale_parts"] if values.get("noise_scale_parts") is None else values["noise_scale_parts"]
        try:
            parts = int(parts)
        except (TypeError, ValueError):
            parts = 2  # the spec names the bad value below
        sizes = sorted(b for b in preset["batch_sizes"] if b >= parts) or sorted(preset["batch_sizes"])
        if len(sizes) > PROFILE_BATCHES:
            sizes = [sizes[0], sizes[len(sizes) // 2], sizes[-1]]
        values["batch_sizes"] = ",".join(map(str, sizes))
    if steps is None:  # measure past the warmup, as the sweep trains: else a warmup preset is refused
        values["epochs"] = PROFILE_STEPS + warmup_steps(values)
    return values


def warmup_steps(values: dict[str, Any]) -> int:
    """Steps the settings' warmup takes at their smallest batch size (the most steps); 0 without a warmup.

    golmant-lsr warms up over 2 epochs, 512 steps at batch 16 of 4,096 samples: longer than a
    200-step profile. Settings that do not build count 0 here; build_spec then names the bad field.
    """
    from batchlab.core.lr_rules import warmup_steps as steps_of_warmup

    try:
        spec = build_spec({**values, "epochs": 10**9})  # any budget the warmup fits in
        return steps_of_warmup(spec.warmup, spec.warmup_unit, -(-spec.samples // min(spec.batch_sizes)))
    except (SpecError, TypeError, ValueError):
        return 0


def profile_spec(values: dict[str, Any], steps: Any = None) -> SweepSpec:
    """The validated spec of a profile; SpecError when it profiles fewer than 2 batch sizes."""
    spec = build_spec(profile_values(values, steps))
    if len(spec.batch_sizes) < 2:
        raise SpecError(
            "batch_sizes", f"{spec.batch_sizes[0]} alone cannot fit a step time; profile 2 or 3 batch sizes"
        )
    return spec


def profile_runner(spec: SweepSpec) -> SweepRunner:
    """The scheduler of a profile: a sweep's, its file marked mode=profile."""
    from batchlab.core.analysis.predict import PROFILE_MODE
    from batchlab.core.sweep.runner import SweepRunner

    return SweepRunner(spec, mode=PROFILE_MODE)


def run_profile(
    spec: SweepSpec,
    out_path: str | os.PathLike,
    sink: Sink | None = None,
    overwrite: bool = False,
    runner: SweepRunner | None = None,
    on_preflight: Callable[[], None] | None = None,
) -> str:
    """Run the profile and write its run file; returns the sweep status."""
    from batchlab.core.sweep.runner import run_sweep

    runner = runner or profile_runner(spec)
    return run_sweep(spec, out_path, sink=sink, overwrite=overwrite, runner=runner, on_preflight=on_preflight)
