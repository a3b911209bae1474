"""The learning-rate rule and schedule per batch size (core/lr_rules.py, docs/learning-rates.md), and rates
taken from an lr-find file (whose content is read above the groups: core/spec_checks.py)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.lr_rules import LR_RULE_ALIASES, LR_RULES, LR_SCHEDULES, WARMUP_UNITS, warmup_steps
from batchlab.core.presets import DEFAULT_PRESET, preset_defaults
from batchlab.core.settings.base import (
    HookFactory,
    Setting,
    SettingsGroup,
    blank,
    choice,
    fail,
    number,
    user_path,
    whole,
)
from batchlab.core.settings.budget import MAX_BATCH_SIZE, budget_steps
from batchlab.core.settings.optimizer import MODEL_OPTIMIZER

LR_PICKS = ("steepest", "min10")  # which suggestion of an lr-find file lr_from takes (core/lr_range.py)
DEFAULTS = preset_defaults(DEFAULT_PRESET)
RULE_CHOICES = (
    ("constant", "constant (BLR): lr at every batch size"),
    ("linear", "linear (LSR): lr x B/B0"),
    ("sqrt", "square root (SRSR): lr x sqrt(B/B0)"),
)
SCHEDULE_CHOICES = (
    ("constant", "constant (after any warmup)"),
    ("step", "step: x factor every N epochs"),
    ("cosine", "cosine: to 0 at the end of the budget"),
    ("plateau", "plateau: x factor when val loss stalls"),
)
LR_PICK_CHOICES = (
    ("steepest", "steepest fall of the smoothed loss"),
    ("min10", "min/10: the lowest loss's rate / 10"),
)


@dataclass(frozen=True)
class LearningRateSettings:
    lr_from: str | None = DEFAULTS["lr_from"]  # lr-find file: each batch size's suggested rate replaces lr
    lr_pick: str = DEFAULTS["lr_pick"]  # with lr_from: the file's steepest or min/10 suggestion
    lr_rule: str = DEFAULTS["lr_rule"]
    lr_base_batch: int | None = DEFAULTS["lr_base_batch"]  # B0; None = the smallest batch size
    warmup: float = DEFAULTS["warmup"]
    warmup_unit: str = DEFAULTS["warmup_unit"]
    lr_schedule: str = DEFAULTS["lr_schedule"]
    lr_decay_factor: float = DEFAULTS["lr_decay_factor"]
    lr_decay_every: int = DEFAULTS["lr_decay_every"]  # epochs, step decay
    lr_patience: int = DEFAULTS["lr_patience"]  # epochs, reduce-on-plateau


def parse_lr_from(value: Any) -> str | None:
    """An lr-find run file (an absolute path) whose suggested rate for each batch size is that run's rate;
    blank = use lr. Whether it is one is checked against the file in core/spec_checks.py."""
    if blank(value):
        return None
    return os.path.abspath(user_path(str(value).strip()))


def parse_lr_pick(value: Any) -> str:
    """With lr_from: `steepest` (the steepest fall of the smoothed loss) or `min10` (the lowest loss's rate / 10)."""
    if blank(value):
        return "steepest"
    text = str(value).strip().lower().replace("/", "")
    return choice("lr_pick", "min10" if text in ("min", "min10", "minimum10") else text, LR_PICKS)


def parse_lr_rule(value: Any) -> str:
    """How the base rate scales with the batch size: constant (BLR), linear (LSR) or sqrt (SRSR)."""
    text = str(value).strip().lower()
    text = LR_RULE_ALIASES.get(text, text)
    if text not in LR_RULES:
        raise SpecError("lr_rule", f"{str(value)!r} is not known; choose constant (BLR), linear (LSR) or sqrt (SRSR)")
    return text


def parse_lr_base_batch(value: Any) -> int | None:
    """B0, the batch size at which the rate is `lr`; blank = the sweep's smallest batch size."""
    if blank(value):
        return None
    what = "the base batch size B0 must be a whole number >= 1 (empty = the smallest batch size)"
    return whole("lr_base_batch", value, 1, what, MAX_BATCH_SIZE)


def parse_warmup(value: Any) -> float:
    what = "warmup must be a number >= 0 of warmup_unit (epochs or steps); 0 = no warmup"
    w = number("warmup", value, what)
    if w < 0:
        raise SpecError("warmup", f"{value!r} is negative; {what}")
    return w


def parse_warmup_unit(value: Any) -> str:
    return choice("warmup_unit", value, WARMUP_UNITS)


def parse_lr_schedule(value: Any) -> str:
    return choice("lr_schedule", value, LR_SCHEDULES)


def parse_lr_decay_factor(value: Any) -> float:
    what = "the decay factor must be a number between 0 and 1 (exclusive), e.g. 0.1"
    f = number("lr_decay_factor", value, what)
    if not 0.0 < f < 1.0:
        raise SpecError("lr_decay_factor", f"{value!r} is out of range; {what}")
    return f


def parse_lr_decay_every(value: Any) -> int:
    return whole("lr_decay_every", value, 1, "step decay's interval must be a whole number of epochs >= 1")


def parse_lr_patience(value: Any) -> int:
    return whole("lr_patience", value, 1, "patience must be a whole number of epochs >= 1")


def _check_lr_from(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """lr_from needs an optimizer BatchLab builds and no rule scaling its rates again."""
    if not p.get("lr_from") or "lr_from" in errors:
        return
    if p.get("optimizer") == MODEL_OPTIMIZER:
        fail(
            errors,
            "lr_from",
            "needs an optimizer BatchLab builds; with optimizer 'model' the model file's own rate is used",
        )
    elif p.get("lr_rule", "constant") != "constant":
        fail(
            errors,
            "lr_rule",
            f"{p['lr_rule']!r} would scale rates already found per batch size by lr_from; "
            "use lr_rule constant with lr_from (schedules still apply)",
        )


def _check_learning_rate(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """The learning-rate rule and schedule against the optimizer and the budget."""
    shaped = {
        name: p.get(name)
        for name, plain in (("lr_rule", "constant"), ("lr_schedule", "constant"), ("warmup", 0.0))
        if name in p and p[name] != plain
    }
    for name, value in shaped.items():
        if p.get("optimizer") == MODEL_OPTIMIZER:
            fail(
                errors,
                name,
                f"{value!r} needs an optimizer BatchLab builds; with optimizer 'model' the model file's own rate "
                "is used; name an optimizer (e.g. sgd or adam) or set it back to its default",
            )
        elif "lr" in p and p["lr"] is None and not p.get("lr_from"):
            fail(errors, "lr", f"{name}={value!r} needs a base learning rate lr0; give lr, e.g. 0.001")
    if (p.get("accumulate") or 1) > 1 and p.get("lr_rule", "constant") != "constant":
        fail(
            errors,
            "lr_rule",
            f"{p['lr_rule']!r} with accumulate {p['accumulate']} is not supported yet (the update's batch is "
            "batch size x accumulate); use lr_rule constant, or accumulate 1",
        )
    if p.get("lr_schedule") == "plateau" and p.get("val_samples") == 0:
        fail(
            errors, "lr_schedule", "'plateau' lowers the rate when the validation loss stalls; it needs val_samples > 0"
        )
    _check_warmup(p, errors)


def _check_warmup(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    if not p.get("warmup"):
        return
    if p.get("warmup_unit") == "steps" and not float(p["warmup"]).is_integer():
        fail(errors, "warmup", f"{p['warmup']!r} is not a whole number of steps; use whole steps or warmup_unit epochs")
    if all(k in p for k in ("warmup_unit", "batch_sizes", "epochs", "samples")):
        for b in sorted(p["batch_sizes"], reverse=True):  # the largest batch has the fewest steps
            total = budget_steps(p, b)
            if warmup_steps(p["warmup"], p["warmup_unit"], math.ceil(p["samples"] / b)) >= total:
                fail(
                    errors,
                    "warmup",
                    f"{p['warmup']:g} {p['warmup_unit']} is not shorter than the budget of batch size {b} "
                    f"({total} steps, {p['epochs']} {p.get('budget_unit', 'epochs')}); "
                    "use a shorter warmup or a longer budget",
                )
                break
    if p.get("lr_rule") == "constant":
        fail(
            errors,
            "warmup",
            f"{p['warmup']:g} {p.get('warmup_unit', 'epochs')} has nothing to ramp: warmup rises from lr to the "
            "rule's rate for the batch size, and with lr_rule constant they are equal; use lr_rule linear or sqrt, "
            "or warmup 0",
        )


GROUP = SettingsGroup(
    name="learning_rate",
    title="Learning-rate rule and schedule",
    values=LearningRateSettings,
    settings=(
        Setting(
            "lr_from",
            "text",
            parse_lr_from,
            "an lr-find run file: each batch size trains at its suggested rate (see --lr-pick) instead of --lr",
            "Rates from",
            "--lr-from",
            placeholder="an lr-find run file: each batch size's own rate",
        ),
        Setting(
            "lr_pick",
            "choice",
            parse_lr_pick,
            "with --lr-from: which suggestion each batch size trains at: steepest (default: the steepest fall of "
            "the smoothed loss) or min10 (the rate of the lowest smoothed loss / 10)",
            "Rate picked",
            "--lr-pick",
            LR_PICK_CHOICES,
        ),
        Setting(
            "lr_rule",
            "choice",
            parse_lr_rule,
            "how the rate scales with batch size B: constant (BLR, default), linear (LSR: lr x B/B0) or sqrt "
            "(SRSR: lr x sqrt(B/B0)); see docs/learning-rates.md",
            "Learning-rate rule",
            "--lr-rule",
            RULE_CHOICES,
        ),
        Setting(
            "lr_base_batch",
            "int",
            parse_lr_base_batch,
            "B0, the batch size at which the rate is --lr (default: the smallest)",
            "Base batch B0",
            "--lr-base-batch",
            placeholder="the smallest batch size",
        ),
        Setting(
            "warmup",
            "float",
            parse_warmup,
            "linear warmup from --lr to the rule's rate over this many --warmup-unit (default 0)",
            "Warmup",
            "--warmup",
        ),
        Setting(
            "warmup_unit",
            "choice",
            parse_warmup_unit,
            "epochs (default) or steps",
            option="--warmup-unit",
            choices=tuple((u, u) for u in WARMUP_UNITS),
        ),
        Setting(
            "lr_schedule",
            "choice",
            parse_lr_schedule,
            "after warmup: constant (default), step (x factor every --lr-decay-every epochs), cosine (to 0 at the "
            "end of the budget) or plateau (x factor when validation loss stalls --lr-patience epochs)",
            "Schedule",
            "--lr-schedule",
            SCHEDULE_CHOICES,
        ),
        Setting(
            "lr_decay_factor",
            "float",
            parse_lr_decay_factor,
            "factor of step decay and plateau, between 0 and 1 (default 0.1)",
            "Decay factor",
            "--lr-decay-factor",
        ),
        Setting(
            "lr_decay_every",
            "int",
            parse_lr_decay_every,
            "step decay interval in epochs (default 2)",
            "Decay every (epochs)",
            "--lr-decay-every",
        ),
        Setting(
            "lr_patience",
            "int",
            parse_lr_patience,
            "plateau: epochs without a better validation loss before a decay (default 2)",
            "Patience (epochs)",
            "--lr-patience",
        ),
    ),  # fmt: skip
    checks=(_check_lr_from, _check_learning_rate),
    # every run records its rate per step (from the plan, or the optimizer's one rate): before StepLog copies rows
    hooks=(HookFactory("learning_rate", "batchlab.core.training.settings_hooks:learning_rate_hook_for", 10),),
)
