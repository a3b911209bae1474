"""Budget and target: how long each run trains, at which batch sizes, and the target it trains to."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.presets import DEFAULT_PRESET, preset_defaults
from batchlab.core.settings.base import (
    HookFactory,
    Setting,
    SettingsGroup,
    blank,
    boolean,
    choice,
    fail,
    whole,
    whole_list,
)
from batchlab.core.targets import ACCURACY_METRICS, TARGET_METRICS, TargetSyntaxError
from batchlab.core.targets import parse_target as parse_target_text

BUDGET_UNITS = ("epochs", "steps", "examples")  # with a target, the budget is the most a run may train
MAX_BATCH_SIZE = 1 << 20
DEFAULTS = preset_defaults(DEFAULT_PRESET)
# Other budgets than --epochs: (option, budget unit); with --target each is the most a run may train.
BUDGET_OPTIONS = (
    ("--max-epochs", "epochs"),
    ("--steps", "steps"),
    ("--max-steps", "steps"),
    ("--examples", "examples"),
    ("--max-examples", "examples"),
)


@dataclass(frozen=True)
class Budget:
    """How long each run trains: `amount` of `unit` (epochs, optimizer steps or training examples).

    A steps or examples budget may end inside an epoch; that last, partial epoch has steps but
    no epoch row. An examples budget ends after the step that reaches `amount` examples.
    """

    unit: str
    amount: int

    def steps(self, samples: int, batch_size: int) -> int:
        """Optimizer steps a run of `batch_size` trains on `samples` training samples."""
        per_epoch = math.ceil(samples / batch_size)
        if self.unit == "steps":
            return self.amount
        if self.unit == "examples":
            full, rest = divmod(self.amount, samples)
            return full * per_epoch + math.ceil(rest / batch_size)
        return self.amount * per_epoch

    def examples(self, samples: int, batch_size: int) -> int:
        """Training examples those steps see (the last batch of an epoch may be short)."""
        per_epoch = math.ceil(samples / batch_size)
        full, rest = divmod(self.steps(samples, batch_size), per_epoch)
        return full * samples + min(rest * batch_size, samples)

    def epochs(self, samples: int, batch_size: int) -> int:
        """Epochs the run starts, the last one possibly partial."""
        return math.ceil(self.steps(samples, batch_size) / math.ceil(samples / batch_size))


@dataclass(frozen=True)
class BudgetSettings:
    budget: Budget = field(default_factory=lambda: Budget(DEFAULTS["budget_unit"], DEFAULTS["epochs"]))
    batch_sizes: tuple[int, ...] = DEFAULTS["batch_sizes"]
    target: str | None = DEFAULTS["target"]  # "val_accuracy=0.98" (core/targets.py); None: train the whole budget
    eval_every: int | None = DEFAULTS["eval_every"]  # steps between evaluations (also at epoch ends); None: epoch ends
    keep_training: bool = DEFAULTS["keep_training"]  # train on to the budget after the target was met
    abort_losers: bool = False  # with a target: stop a run once it can no longer meet it first (core/sweep/)


def parse_budget_unit(value: Any) -> str:
    return choice("budget_unit", value, BUDGET_UNITS)


def parse_epochs(value: Any) -> int:
    return whole("epochs", value, 1, "epochs must be a whole number >= 1")


def parse_budget_amount(unit: str, value: Any) -> int:
    """The budget's amount, with the unit's own name and message (the field is `epochs` in flat values)."""
    if unit == "epochs":
        return parse_epochs(value)
    what = f"the {unit} budget must be a whole number >= 1" + (" (optimizer steps)" if unit == "steps" else "")
    return whole(unit, value, 1, what)


def parse_batch_sizes(value: Any) -> tuple[int, ...]:
    what = f"batch sizes must be whole numbers from 1 to {MAX_BATCH_SIZE}, e.g. 8,16,32"
    sizes = whole_list("batch_sizes", value, 1, what)
    for s in sizes:
        if s > MAX_BATCH_SIZE:
            raise SpecError("batch_sizes", f"{s} is too large; {what}")
    return sizes


def parse_target(value: Any) -> str | None:
    """A target as METRIC=VALUE (core/targets.py), stored in its canonical text; blank: no target."""
    if blank(value):
        return None
    try:
        return parse_target_text(str(value)).text
    except TargetSyntaxError as e:
        raise SpecError("target", str(e)) from None


def parse_eval_every(value: Any) -> int | None:
    """Steps between evaluations (each epoch end is one too); blank: at epoch ends only."""
    if blank(value):
        return None
    return whole("eval_every", value, 1, "evaluate every N optimizer steps, N a whole number >= 1 (empty = epoch ends)")


def parse_keep_training(value: Any) -> bool:
    return boolean("keep_training", value)


def parse_abort_losers(value: Any) -> bool:
    return boolean("abort_losers", False if blank(value) else value)


def budget_steps(p: Mapping[str, Any], batch_size: int) -> int:
    """Optimizer steps in one run's budget at this batch size (with a target: the most it may train)."""
    return Budget(p.get("budget_unit", "epochs"), p["epochs"]).steps(p["samples"], batch_size)


def _check_batch_sizes(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    if "batch_sizes" in p and "samples" in p:
        too_big = [b for b in p["batch_sizes"] if b > p["samples"]]
        if too_big:
            fail(
                errors,
                "batch_sizes",
                f"{too_big[0]} is larger than the {p['samples']} training samples; "
                "use batch sizes up to the number of samples",
            )


def _check_target(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """A target (and budget) the run can meet: its metric exists for the task, the engine supports it.
    (A compiled metric of the user's model is checked against the file: core/spec_checks.py.)"""
    target = parse_target_text(p["target"]) if p.get("target") else None
    if target is not None and "target" not in errors:
        if target.metric in ACCURACY_METRICS and p.get("workload") == "autoencoder":
            fail(
                errors,
                "target",
                f"{target.text}: the autoencoder has no accuracy, so this target can never be met; "
                "use a val_loss or train_loss target",
            )
        elif target.metric not in TARGET_METRICS and p.get("workload") != "keras-file":
            fail(
                errors,
                "target",
                f"{target.text}: {target.metric} would be a compiled metric of your own model (--model); this "
                f"workload has {', '.join(TARGET_METRICS)}",
            )
        elif target.metric.startswith("val_") and p.get("val_samples") == 0:
            fail(
                errors,
                "target",
                f"{target.text} needs validation, but val_samples is 0; set val_samples above 0 "
                "or use a train_loss target",
            )
        elif target.metric.endswith("_loss") and target.value <= 0 and p.get("workload") != "keras-file":
            fail(
                errors,
                "target",
                f"{target.text} can never be met: this workload's loss is never below 0; use a value above 0",
            )
    for name, what in (
        ("keep_training", "train on after meeting it"),
        ("abort_losers", "stop runs that cannot meet it first"),
    ):
        if p.get(name) and p.get("target") is None and "target" not in errors:
            fail(errors, name, f"only applies with a target ({what}); give a target or leave it off")
    if p.get("loop") == "fit" and "loop" not in errors:
        asks = [
            name
            for name, given in (
                ("a target", p.get("target") is not None),
                ("eval_every", p.get("eval_every") is not None),
                (f"a {p.get('budget_unit')} budget", p.get("budget_unit") not in (None, "epochs")),
            )
            if given
        ]
        if asks:
            fail(
                errors,
                "loop",
                f"the fit engine trains whole epochs and has no evaluation points, so it cannot take {asks[0]}; "
                "use --loop loop (BatchLab's loop supports targets, eval_every and steps/examples budgets)",
            )


def _from_flat(flat: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: flat[k] for k in ("batch_sizes", "target", "eval_every", "keep_training", "abort_losers") if k in flat}
    if "budget_unit" in flat or "epochs" in flat:
        out["budget"] = Budget(flat.get("budget_unit", "epochs"), flat["epochs"])
    return out


def _to_flat(values: BudgetSettings) -> dict[str, Any]:
    return {
        "budget_unit": values.budget.unit,
        "epochs": values.budget.amount,
        "batch_sizes": values.batch_sizes,
        "target": values.target,
        "eval_every": values.eval_every,
        "keep_training": values.keep_training,
        "abort_losers": values.abort_losers,
    }


def _add_arguments(group) -> None:
    for option, unit in BUDGET_OPTIONS:
        what = "optimizer steps" if unit == "steps" else f"training {unit}"
        group.add_argument(
            option, default=None, help=f"budget: {what} per run" + (" (with --target)" * ("max" in option))
        )


def _read_arguments(args) -> dict[str, Any]:
    """budget_unit and its amount (the `epochs` field) from whichever budget option was given; none: the preset's."""
    given = [("--epochs", "epochs", args.epochs)] if args.epochs is not None else []
    given += [(o, unit, getattr(args, o[2:].replace("-", "_"), None)) for o, unit in BUDGET_OPTIONS]
    given = [g for g in given if g[2] is not None]
    if len(given) > 1:
        raise SpecError(
            "budget", f"{given[0][0]} and {given[1][0]} both set the budget; give one of --epochs, --steps, --examples"
        )
    if not given:
        return {"epochs": None}
    _option, unit, amount = given[0]
    return {"budget_unit": unit, "epochs": amount}


GROUP = SettingsGroup(
    name="budget",
    title="Budget and target",
    values=BudgetSettings,
    settings=(
        Setting(
            "budget_unit",
            "choice",
            parse_budget_unit,
            "what the budget counts: epochs, steps or examples",
            choices=tuple((u, u) for u in BUDGET_UNITS),
        ),
        Setting(
            "epochs",
            "int",
            parse_epochs,
            "epochs per run (with --target: the most a run may train; also --max-epochs)",
            "Epochs",
            "--epochs",
        ),
        Setting(
            "batch_sizes",
            "text",
            parse_batch_sizes,
            "comma-separated, e.g. 8,16,32",
            "Batch sizes",
            "--batch-sizes",
            placeholder="e.g. 8, 16, 32, 64",
        ),
        Setting(
            "target",
            "text",
            parse_target,
            "train until METRIC is strictly better than VALUE, METRIC=VALUE with METRIC train_loss, val_loss (met "
            "below), val_accuracy (above) or val_error (below), e.g. val_accuracy=0.98; the budget is the maximum",
            "Target",
            "--target",
        ),
        Setting(
            "eval_every",
            "int",
            parse_eval_every,
            "evaluate every N optimizer steps, and at every epoch end (default: epoch ends)",
            "Evaluate every (steps)",
            "--eval-every",
            placeholder="at epoch ends only",
        ),
        Setting(
            "keep_training",
            "bool",
            parse_keep_training,
            "with --target: train on to the budget after the target was met (default: stop there)",
            option="--keep-training",
            check_text="train on to the budget after the target",
        ),
        Setting(
            "abort_losers",
            "bool",
            parse_abort_losers,
            "with --target: stop a run once it can no longer reach the target before a run that already did "
            "(default: every run trains to its target or budget)",
            option="--abort-losers",
            check_text="Abort runs that cannot win",
        ),
    ),  # fmt: skip
    checks=(_check_batch_sizes, _check_target),
    # evaluation points (a target or eval_every): before RunEvents, which sends run_ended last
    hooks=(HookFactory("evaluations", "batchlab.core.training.settings_hooks:evaluations_hook_for", 110),),
    add_arguments=_add_arguments,
    read_arguments=_read_arguments,
    from_flat=_from_flat,
    to_flat=_to_flat,
)
