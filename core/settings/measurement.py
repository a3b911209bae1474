"""Measurement: the gradient noise scale (core/training/noise_scale.py), measured every N steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.presets import DEFAULT_PRESET, preset_defaults
from batchlab.core.settings.base import HookFactory, Setting, SettingsGroup, blank, fail, whole

DEFAULTS = preset_defaults(DEFAULT_PRESET)
MAX_NOISE_SCALE_PARTS = 64


@dataclass(frozen=True)
class MeasurementSettings:
    # measured every N steps (None: off), the step's batch split into this many micro-batches
    noise_scale_every: int | None = DEFAULTS["noise_scale_every"]
    noise_scale_parts: int = DEFAULTS["noise_scale_parts"]


def parse_noise_scale_every(value: Any) -> int | None:
    """Steps between gradient noise scale measurements; blank: not measured."""
    if blank(value):
        return None
    what = "measure the gradient noise scale every N steps, N a whole number >= 1 (empty = not measured)"
    return whole("noise_scale_every", value, 1, what)


def parse_noise_scale_parts(value: Any) -> int:
    """Micro-batches a measured step's batch is split into (k >= 2: two batch sizes, B/k and B)."""
    what = f"the batch is split into k micro-batches, k a whole number from 2 to {MAX_NOISE_SCALE_PARTS}"
    return whole("noise_scale_parts", 4 if blank(value) else value, 2, what, MAX_NOISE_SCALE_PARTS)


def _check_noise_scale(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """The noise scale is measured by BatchLab's loop, on batches of at least one sample per micro-batch."""
    if p.get("noise_scale_every") is None or "noise_scale_every" in errors:
        return
    if p.get("loop") == "fit":
        fail(
            errors,
            "noise_scale_every",
            f"{p['noise_scale_every']} needs BatchLab's loop (it measures micro-batch gradients before a step); "
            "the fit engine cannot; use --loop loop or leave it empty",
        )
        return
    k = p.get("noise_scale_parts")
    small = [b for b in p.get("batch_sizes", ()) if isinstance(k, int) and b < k]
    if small:
        fail(
            errors,
            "noise_scale_parts",
            f"{k} micro-batches need batches of at least {k} samples, and batch size {small[0]} is smaller; "
            + (
                f"use noise_scale_parts up to {small[0]} or larger batch sizes"
                if small[0] >= 2
                else "a batch of 1 cannot be split: drop it or leave noise_scale_every empty"
            ),
        )


GROUP = SettingsGroup(
    name="measurement",
    title="Measurement",
    values=MeasurementSettings,
    settings=(
        Setting(
            "noise_scale_every",
            "int",
            parse_noise_scale_every,
            "measure the gradient noise scale B_simple every N steps (default: off); off the run's clock",
            "Noise scale every (steps)",
            "--noise-scale-every",
            placeholder="not measured",
        ),
        Setting(
            "noise_scale_parts",
            "int",
            parse_noise_scale_parts,
            "micro-batches a measured batch is split into, 2 to 64 (default 4; the batch size mod k is left out)",
            "Noise scale parts",
            "--noise-scale-parts",
        ),
    ),  # fmt: skip
    checks=(_check_noise_scale,),
    # its rows go out before run_ended (RunEvents), after the step rows it measures between
    hooks=(HookFactory("noise_scale", "batchlab.core.training.noise_scale:noise_scale_hook_for", 100),),
)
