"""The batch-size schedule of each run (core/batch_rules.py, docs/learning-rates.md): constant, grow or two_phase."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from batchlab.core.batch_rules import BATCH_SCHEDULE_ALIASES, BATCH_SCHEDULES
from batchlab.core.errors import SpecError
from batchlab.core.presets import DEFAULT_PRESET, preset_defaults
from batchlab.core.settings.base import HookFactory, Setting, SettingsGroup, blank, fail, number, whole
from batchlab.core.settings.budget import MAX_BATCH_SIZE, budget_steps
from batchlab.core.settings.optimizer import MODEL_OPTIMIZER

DEFAULTS = preset_defaults(DEFAULT_PRESET)
BATCH_SCHEDULE_CHOICES = (
    ("constant", "constant: each run keeps its batch"),
    ("grow", "grow: batch x factor every N epochs (Smith)"),
    ("two_phase", "two phase: larger batch once val loss stalls"),
)


@dataclass(frozen=True)
class BatchScheduleSettings:
    batch_schedule: str = DEFAULTS["batch_schedule"]
    batch_growth_factor: float = DEFAULTS["batch_growth_factor"]  # grow: x this ...
    batch_growth_every: int = DEFAULTS["batch_growth_every"]  # ... every N epochs
    max_batch: int | None = DEFAULTS["max_batch"]  # grow: the cap (then the rate decays); None = samples
    batch_switch_to: int | None = DEFAULTS["batch_switch_to"]  # two_phase: the larger batch
    batch_patience: int = DEFAULTS["batch_patience"]  # two_phase: evaluations without improvement


def parse_batch_schedule(value: Any) -> str:
    """constant (each run keeps its batch), grow (Smith et al.) or two_phase (a larger batch once val loss stalls)."""
    text = str(value).strip().lower()
    text = BATCH_SCHEDULE_ALIASES.get(text, text)
    if text not in BATCH_SCHEDULES:
        raise SpecError(
            "batch_schedule",
            f"{str(value)!r} is not known; choose constant, grow (x factor every N epochs, Smith et al.) or two_phase",
        )
    return text


def parse_batch_growth_factor(value: Any) -> float:
    what = "grow multiplies the batch by this; it must be a number > 1, e.g. 2 or 5"
    f = number("batch_growth_factor", value, what)
    if f <= 1.0:
        raise SpecError("batch_growth_factor", f"{value!r} is not above 1; {what}")
    return f


def parse_batch_growth_every(value: Any) -> int:
    return whole("batch_growth_every", value, 1, "grow's interval must be a whole number of epochs >= 1")


def _optional_batch(field_name: str, value: Any, what: str) -> int | None:
    if blank(value):
        return None
    b = whole(field_name, value, 1, what)
    if b > MAX_BATCH_SIZE:
        raise SpecError(field_name, f"{b} is too large; {what}")
    return b


def parse_max_batch(value: Any) -> int | None:
    """grow's largest batch (past it the rate decays instead); blank = the training samples."""
    return _optional_batch(
        "max_batch", value, "the largest batch of grow must be a whole number >= 1 (empty = the training samples)"
    )


def parse_batch_switch_to(value: Any) -> int | None:
    """two_phase's larger batch; blank = no two-phase schedule."""
    return _optional_batch(
        "batch_switch_to", value, "two_phase's larger batch must be a whole number >= 1, larger than every batch size"
    )


def parse_batch_patience(value: Any) -> int:
    return whole("batch_patience", value, 1, "patience must be a whole number of evaluations >= 1")


def _check_batch_schedule(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """A batch schedule the runs can follow: batches that fit the data, a change inside the budget, a rate to decay."""
    schedule = p.get("batch_schedule", "constant")
    if "batch_schedule" in errors:
        return
    for name, user in (("max_batch", "grow"), ("batch_switch_to", "two_phase")):
        if p.get(name) is not None and schedule != user:
            fail(
                errors,
                name,
                f"{p[name]} applies to batch_schedule {user} only; set batch_schedule {user} or leave it empty",
            )
    if schedule == "constant":
        return
    if p.get("loop") == "fit":
        fail(
            errors,
            "batch_schedule",
            f"{schedule!r} needs loop 'loop': the fit engine trains every epoch at one batch size",
        )
    if (p.get("accumulate") or 1) > 1:
        fail(
            errors,
            "batch_schedule",
            f"{schedule!r} with accumulate {p['accumulate']} is not supported; use accumulate 1",
        )
    if (p.get("fused") or 1) > 1:
        fail(errors, "batch_schedule", f"{schedule!r} with fused {p['fused']} is not supported (yet); use fused 1")
    if schedule == "grow":
        _check_grow(p, errors)
    if schedule == "two_phase":
        _check_two_phase(p, errors)


def _check_grow(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    sizes, samples = p.get("batch_sizes") or (), p.get("samples")
    lr_schedule = p.get("lr_schedule", "constant")
    if p.get("optimizer") == MODEL_OPTIMIZER or (p.get("lr") is None and not p.get("lr_from") and "lr" in p):
        fail(
            errors,
            "batch_schedule",
            "'grow' decays the rate once the batch reaches max_batch, so it needs a rate BatchLab sets: "
            "give lr and an optimizer BatchLab builds (e.g. sgd)",
        )
    if lr_schedule != "constant":
        fail(
            errors,
            "lr_schedule",
            f"{lr_schedule!r} with batch_schedule grow: grow takes the place of the rate's decay (the rate "
            "decays only once the batch reaches max_batch); use lr_schedule constant",
        )
    top = p.get("max_batch")
    if top is not None and samples is not None and top > samples:
        fail(
            errors,
            "max_batch",
            f"{top} is larger than the {samples} training samples; use at most {samples} "
            "(empty = the training samples)",
        )
    elif top is not None and sizes and top < max(sizes):
        fail(errors, "max_batch", f"{top} is smaller than batch size {max(sizes)}; use at least the largest batch size")
    every = p.get("batch_growth_every")
    if isinstance(every, int) and samples and "epochs" in p:
        for b in sorted(sizes):  # the smallest batch has the most steps per epoch
            total = budget_steps(p, b)
            if total <= every * math.ceil(samples / b):
                fail(
                    errors,
                    "batch_growth_every",
                    f"{every} epochs: the first change (at epoch {every}) is beyond the budget of batch size {b} "
                    f"({total} steps, {p['epochs']} {p.get('budget_unit', 'epochs')}); "
                    "use fewer epochs between changes or a longer budget",
                )
                break


def _check_two_phase(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    sizes, samples = p.get("batch_sizes") or (), p.get("samples")
    lr_schedule = p.get("lr_schedule", "constant")
    if lr_schedule in ("step", "cosine"):
        fail(
            errors,
            "lr_schedule",
            f"{lr_schedule!r} counts steps of one batch size, and two_phase changes the steps per epoch; "
            "use lr_schedule constant or plateau with batch_schedule two_phase",
        )
    if p.get("val_samples") == 0:
        fail(errors, "batch_schedule", "'two_phase' switches when the validation loss stalls; it needs val_samples > 0")
    to = p.get("batch_switch_to")
    if to is None:
        fail(errors, "batch_switch_to", "two_phase needs the larger batch it switches to, e.g. 512")
    elif samples is not None and to > samples:
        fail(errors, "batch_switch_to", f"{to} is larger than the {samples} training samples; use at most {samples}")
    elif sizes and to <= max(sizes):
        fail(
            errors,
            "batch_switch_to",
            f"{to} is not larger than batch size {max(sizes)}; two_phase switches to a larger batch: "
            f"use more than {max(sizes)}",
        )


GROUP = SettingsGroup(
    name="batch_schedule",
    title="Batch schedule",
    values=BatchScheduleSettings,
    settings=(
        Setting(
            "batch_schedule",
            "choice",
            parse_batch_schedule,
            "constant (default), grow (batch x --batch-growth-factor every --batch-growth-every epochs up to "
            "--max-batch, then the rate decays instead; Smith et al.) or two-phase (--batch-switch-to once the "
            "validation loss stalls for --batch-patience evaluations); see docs/learning-rates.md",
            "Batch schedule",
            "--batch-schedule",
            BATCH_SCHEDULE_CHOICES,
        ),
        Setting(
            "batch_growth_factor",
            "float",
            parse_batch_growth_factor,
            "grow: multiply the batch by this, > 1 (default 2)",
            "Growth factor",
            "--batch-growth-factor",
        ),
        Setting(
            "batch_growth_every",
            "int",
            parse_batch_growth_every,
            "grow: epochs between changes (default 2)",
            "Grow every (epochs)",
            "--batch-growth-every",
        ),
        Setting(
            "max_batch",
            "int",
            parse_max_batch,
            "grow: the largest batch, then the rate decays (default: the training samples)",
            "Max batch",
            "--max-batch",
            placeholder="the training samples (then the rate decays)",
        ),
        Setting(
            "batch_switch_to",
            "int",
            parse_batch_switch_to,
            "two-phase: the larger batch, above every --batch-sizes value",
            "Switch to batch",
            "--batch-switch-to",
            placeholder="the larger batch of the second phase",
        ),
        Setting(
            "batch_patience",
            "int",
            parse_batch_patience,
            "two-phase: evaluations without a better loss, then the switch (default 2)",
            "Switch patience",
            "--batch-patience",
        ),
    ),  # fmt: skip
    checks=(_check_batch_schedule,),
    # the batch of each epoch; after the rates hook, whose rate it scales once grow reaches max_batch
    hooks=(HookFactory("batch_schedule", "batchlab.core.training.settings_hooks:batch_schedule_hook_for", 20),),
)
