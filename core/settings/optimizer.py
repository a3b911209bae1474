"""The optimizer: which one, its base learning rate, momentum, Nesterov and weight decay."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.presets import DEFAULT_PRESET, preset_defaults
from batchlab.core.settings.base import Setting, SettingsGroup, blank, boolean, choice, fail, number

# The optimizers a user can name, each with its class in keras.optimizers (the training child builds
# it from this table), plus "model": keep the optimizer compiled into a .keras file.
OPTIMIZER_CLASSES = {
    "adam": "Adam",
    "sgd": "SGD",
    "rmsprop": "RMSprop",
    "adagrad": "Adagrad",
    "adamw": "AdamW",
    "nadam": "Nadam",
    "adadelta": "Adadelta",
    "lamb": "Lamb",
    "lars": "LARS",  # BatchLab's own (core/training/optimizers.py): Keras 3 has no LARS
}
MODEL_OPTIMIZER = "model"
OPTIMIZERS = (*OPTIMIZER_CLASSES, MODEL_OPTIMIZER)
MOMENTUM_OPTIMIZERS = ("sgd", "rmsprop", "lars")  # the ones that take a momentum argument
NESTEROV_OPTIMIZERS = ("sgd",)
WEIGHT_DECAY_OPTIMIZERS = ("adamw", "lamb", "lars")  # the ones the weight_decay field applies to
DEFAULTS = preset_defaults(DEFAULT_PRESET)


@dataclass(frozen=True)
class OptimizerSettings:
    optimizer: str = DEFAULTS["optimizer"]
    lr: float | None = DEFAULTS["lr"]  # lr0; None: the optimizer's own default
    momentum: float = DEFAULTS["momentum"]
    nesterov: bool = DEFAULTS["nesterov"]
    weight_decay: float | None = DEFAULTS["weight_decay"]  # None = the optimizer's own default


def parse_optimizer(value: Any) -> str:
    return choice("optimizer", value, OPTIMIZERS)


def parse_lr(value: Any) -> float | None:
    if blank(value):
        return None
    what = "the learning rate must be a number > 0, e.g. 0.001 (empty = the optimizer's default)"
    try:
        lr = float(value)
    except (TypeError, ValueError):
        raise SpecError("lr", f"{value!r} is not a number; {what}") from None
    if not (lr > 0 and lr != float("inf")):
        raise SpecError("lr", f"{value!r} is not allowed; {what}")
    return lr


def parse_momentum(value: Any) -> float:
    what = f"momentum must be a number from 0 to 1 (used by {' and '.join(MOMENTUM_OPTIMIZERS)})"
    try:
        m = float(value)
    except (TypeError, ValueError):
        raise SpecError("momentum", f"{value!r} is not a number; {what}") from None
    if not (0.0 <= m < 1.0):
        raise SpecError("momentum", f"{value!r} is out of range; {what}")
    return m


def parse_nesterov(value: Any) -> bool:
    return boolean("nesterov", value)


def parse_weight_decay(value: Any) -> float | None:
    if blank(value):
        return None
    what = f"weight decay must be a number >= 0 (used by {', '.join(WEIGHT_DECAY_OPTIMIZERS)}; empty = their default)"
    wd = number("weight_decay", value, what)
    if wd < 0:
        raise SpecError("weight_decay", f"{value!r} is negative; {what}")
    return wd


def _check_model_optimizer(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    if p.get("optimizer") == MODEL_OPTIMIZER and p.get("workload") != "keras-file":
        fail(
            errors,
            "optimizer",
            f"{MODEL_OPTIMIZER!r} (keep the model file's optimizer) only works with a .keras model file",
        )


def _check_optimizer_options(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """Nesterov and weight decay only where the optimizer takes them."""
    optimizer = p.get("optimizer")
    if p.get("nesterov") and optimizer is not None:
        if optimizer not in NESTEROV_OPTIMIZERS:
            fail(
                errors, "nesterov", f"Nesterov momentum applies to {', '.join(NESTEROV_OPTIMIZERS)}, not {optimizer!r}"
            )
        elif p.get("momentum") == 0:
            fail(errors, "nesterov", "Nesterov momentum needs momentum > 0, e.g. 0.9")
    if p.get("weight_decay") is not None and optimizer is not None and optimizer not in WEIGHT_DECAY_OPTIMIZERS:
        fail(
            errors,
            "weight_decay",
            f"{p['weight_decay']!r} is not used by {optimizer!r}; weight decay applies to "
            f"{', '.join(WEIGHT_DECAY_OPTIMIZERS)} (empty for the others)",
        )


GROUP = SettingsGroup(
    name="optimizer",
    title="Optimizer",
    values=OptimizerSettings,
    settings=(
        Setting(
            "optimizer",
            "choice",
            parse_optimizer,
            f"{', '.join(OPTIMIZERS)} (lars: layer-wise adaptive rates, BatchLab's own; model: the .keras file's own)",
            "Optimizer",
            "--optimizer",
            tuple((o, o) for o in OPTIMIZERS),
        ),
        Setting(
            "lr",
            "float",
            parse_lr,
            "learning rate (default: the preset's; \"\" = the optimizer's own default)",
            "Learning rate",
            "--lr",
            placeholder="optimizer default",
        ),
        Setting("momentum", "float", parse_momentum, "momentum for sgd, rmsprop and lars", "Momentum", "--momentum"),
        Setting(
            "nesterov", "bool", parse_nesterov, "Nesterov momentum (sgd)", option="--nesterov", check_text="Nesterov"
        ),
        Setting(
            "weight_decay",
            "float",
            parse_weight_decay,
            "weight decay of adamw, lamb and lars (default: the optimizer's own)",
            "Weight decay",
            "--weight-decay",
            placeholder="the optimizer's own default",
        ),
    ),  # fmt: skip
    checks=(_check_model_optimizer, _check_optimizer_options),
)
