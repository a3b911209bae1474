"""The sweep spec: what to measure, validated once for the CLI and the GUI alike.

A spec is built from a preset plus the user's overrides. Every value a user can
type goes through one parser per field, so the command line and the window show
the same message for the same mistake. Nothing here imports TensorFlow or Qt.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from batchlab.core.batch_rules import BATCH_SCHEDULE_ALIASES, BATCH_SCHEDULES
from batchlab.core.errors import SpecError
from batchlab.core.lr_rules import LR_RULE_ALIASES, LR_RULES, LR_SCHEDULES, WARMUP_UNITS, warmup_steps
from batchlab.core.presets import DEFAULT_PRESET, PRESETS, SIZED_FROM_DATA, WORKLOADS, preset_defaults
from batchlab.core.targets import (
    ACCURACY_METRICS,
    TARGET_METRICS,
    VALIDATION_METRICS,
    Target,
    TargetSyntaxError,
)
from batchlab.core.targets import parse_target as parse_target_text

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
BUDGET_UNITS = ("epochs", "steps", "examples")  # with a target, the budget is the most a run may train
BUNDLED_DATA = "bundled"
BUNDLED_LARGE_DATA = "bundled-large"  # the bundled subset and 20,000 more training images (mnist-cnn-98)
BUNDLED_SOURCES = (BUNDLED_DATA, BUNDLED_LARGE_DATA)
KERAS_PREFIX = "keras:"
KERAS_DATASETS = ("mnist", "fashion_mnist", "cifar10")
NPZ_SUFFIXES = (".npz",)
HDF5_SUFFIXES = (".h5", ".hdf5")
CSV_SUFFIXES = (".csv",)
DATA_FILE_SUFFIXES = NPZ_SUFFIXES + HDF5_SUFFIXES + CSV_SUFFIXES
MAX_BATCH_SIZE = 1 << 20
SEED_LIMIT = 1 << 32  # TensorFlow and numpy take unsigned 32-bit seeds
USER_MODEL_PRESET = "keras-file"  # what --model FILE implies when no preset / workload is named
USER_MODEL_WORKLOAD = "keras-file"

_DEFAULTS = preset_defaults(DEFAULT_PRESET)


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
class SweepSpec:
    """Everything that defines a sweep; JSON-serialisable and stored in the run file."""

    preset: str = DEFAULT_PRESET
    workload: str = _DEFAULTS["workload"]
    model_file: str | None = _DEFAULTS["model_file"]
    data: str = _DEFAULTS["data"]
    samples: int = _DEFAULTS["samples"]
    val_samples: int = _DEFAULTS["val_samples"]
    budget: Budget = field(default_factory=lambda: Budget(_DEFAULTS["budget_unit"], _DEFAULTS["epochs"]))
    batch_sizes: tuple[int, ...] = _DEFAULTS["batch_sizes"]
    optimizer: str = _DEFAULTS["optimizer"]
    lr: float | None = _DEFAULTS["lr"]
    momentum: float = _DEFAULTS["momentum"]
    seeds: tuple[int, ...] = _DEFAULTS["seeds"]
    shuffle: bool = _DEFAULTS["shuffle"]
    device: str = _DEFAULTS["device"]
    loop: str = _DEFAULTS["loop"]  # training engine: BatchLab's instrumented loop, or model.fit with a timing callback
    sync: str = _DEFAULTS["sync"]  # instrumented loop: sync the device after every step, or only on sampled steps
    target: str | None = _DEFAULTS["target"]  # "val_accuracy=0.98" (core/targets.py); None: train the whole budget
    eval_every: int | None = _DEFAULTS["eval_every"]  # steps between evaluations (also at epoch ends); None: epoch ends
    keep_training: bool = _DEFAULTS["keep_training"]  # train on to the budget after the target was met
    accumulate: int = _DEFAULTS["accumulate"]  # micro-batches per optimizer update (gradient accumulation)
    lr_from: str | None = _DEFAULTS["lr_from"]  # lr-find file: each batch size's suggested rate replaces lr
    # Learning-rate rule and schedule per batch size (core/lr_rules.py, docs/learning-rates.md).
    lr_rule: str = _DEFAULTS["lr_rule"]
    lr_base_batch: int | None = _DEFAULTS["lr_base_batch"]  # B0; None = the smallest batch size
    warmup: float = _DEFAULTS["warmup"]
    warmup_unit: str = _DEFAULTS["warmup_unit"]
    lr_schedule: str = _DEFAULTS["lr_schedule"]
    lr_decay_factor: float = _DEFAULTS["lr_decay_factor"]
    lr_decay_every: int = _DEFAULTS["lr_decay_every"]  # epochs, step decay
    lr_patience: int = _DEFAULTS["lr_patience"]  # epochs, reduce-on-plateau
    nesterov: bool = _DEFAULTS["nesterov"]
    weight_decay: float | None = _DEFAULTS["weight_decay"]  # None = the optimizer's own default
    scale: float | None = _DEFAULTS["scale"]  # inputs divided by this (e.g. 255 for uint8 pixels); None: as stored
    target_column: str | None = _DEFAULTS["target_column"]  # CSV data: the target column(s), comma-separated
    val_fraction: float = _DEFAULTS["val_fraction"]  # CSV data: the last this fraction of rows validate
    # Gradient noise scale (core/training/noise_scale.py): measured every N steps (None: off), the step's batch
    # split into this many micro-batches.
    noise_scale_every: int | None = _DEFAULTS["noise_scale_every"]
    noise_scale_parts: int = _DEFAULTS["noise_scale_parts"]
    # Fused and compiled execution (core/training/fused.py, execution.py; docs/performance.md).
    fused: int = _DEFAULTS["fused"]  # steps per call of the step function; each step's loss still recorded
    xla: bool | str = _DEFAULTS["xla"]  # jit_compile the train step: True, False or "auto" (where it pays)
    mixed_precision: bool = _DEFAULTS["mixed_precision"]  # mixed_float16 with loss scaling (GPU only)
    # Batch-size schedule per run (core/batch_rules.py, docs/learning-rates.md).
    batch_schedule: str = _DEFAULTS["batch_schedule"]
    batch_growth_factor: float = _DEFAULTS["batch_growth_factor"]  # grow: x this ...
    batch_growth_every: int = _DEFAULTS["batch_growth_every"]  # ... every N epochs
    max_batch: int | None = _DEFAULTS["max_batch"]  # grow: the cap (then the rate decays); None = samples
    batch_switch_to: int | None = _DEFAULTS["batch_switch_to"]  # two_phase: the larger batch
    batch_patience: int = _DEFAULTS["batch_patience"]  # two_phase: evaluations without improvement
    lr_pick: str = _DEFAULTS["lr_pick"]  # with lr_from: the file's steepest or min/10 suggestion
    # The training child's TensorFlow threads (intra- and inter-op); 0: TensorFlow's default (docs/performance.md).
    tf_threads: int = _DEFAULTS["tf_threads"]
    # Fused runs on a Linux CPU: the next run's child builds, traces and compiles while this run trains.
    prepare_ahead: bool = _DEFAULTS["prepare_ahead"]
    # With a target: stop a run once it can no longer reach it sooner than the best time to target so far.
    abort_losers: bool = _DEFAULTS["abort_losers"]

    @property
    def epochs(self) -> int:
        """The budget's amount (epochs for an epochs budget; see `budget` for the unit)."""
        return self.budget.amount

    @property
    def target_spec(self) -> Target | None:
        """The parsed target, or None when runs train their whole budget."""
        return parse_target_text(self.target) if self.target else None

    @property
    def evaluates(self) -> bool:
        """True when runs record evaluation points (a target, or evaluations every N steps)."""
        return self.target is not None or self.eval_every is not None

    def runs(self) -> list[RunSpec]:
        """One run per (seed, batch size); seed-major so the first pass covers every batch size."""
        out = []
        for seed in self.seeds:
            for batch in self.batch_sizes:
                out.append(RunSpec(index=len(out), batch_size=batch, seed=seed, sweep=self))
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready values; `from_dict` rebuilds exactly this spec from it."""
        d = asdict(self)
        d["batch_sizes"] = list(self.batch_sizes)
        d["seeds"] = list(self.seeds)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def flat(self) -> dict[str, Any]:
        """The spec as field values by parser name (the budget as budget_unit and epochs)."""
        return _flatten_budget(self.to_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepSpec:
        """Rebuild the spec `to_dict` wrote (e.g. a run file's `spec`, or the child's copy), validating every field.

        No preset default is applied to a value that is present: a blank learning rate stays blank.
        A field a file from an older version lacks takes its preset's value.
        """
        parsed, errors = _parse_all(d, blank_means_default=False)
        if errors:
            raise next(iter(errors.values()))
        return _spec_from_parsed(parsed)


@dataclass(frozen=True)
class RunSpec:
    """One run: a sweep's settings at one batch size and seed."""

    index: int
    batch_size: int
    seed: int
    sweep: SweepSpec

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "sweep": self.sweep.to_dict(),
        }

    @property
    def lr(self) -> float | None:
        """This run's learning rate: with lr_from, the lr-find suggestion for its batch size; else the spec's lr."""
        if self.sweep.lr_from:
            return lr_find_rates(self.sweep.lr_from, self.sweep.lr_pick)[self.batch_size]
        return self.sweep.lr

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSpec:
        return cls(
            index=int(d["index"]),
            batch_size=int(d["batch_size"]),
            seed=int(d["seed"]),
            sweep=SweepSpec.from_dict(d["sweep"]),
        )


# ---------------------------------------------------------------- field parsers


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def _int(field_name: str, value: Any, minimum: int, what: str, maximum: int | None = None) -> int:
    if isinstance(value, bool):
        raise SpecError(field_name, f"{value!r} is not an integer; {what}")
    if isinstance(value, float):
        if not value.is_integer():
            raise SpecError(field_name, f"{value!r} is not an integer; {what}")
        value = int(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            raise SpecError(field_name, f"{text!r} is not an integer; {what}") from None
    if not isinstance(value, int):
        raise SpecError(field_name, f"{value!r} is not an integer; {what}")
    if value < minimum:
        raise SpecError(field_name, f"{value} is too small; {what}")
    if maximum is not None and value > maximum:
        raise SpecError(field_name, f"{value} is too large; {what}")
    return value


def _int_list(field_name: str, value: Any, minimum: int, what: str) -> tuple[int, ...]:
    if isinstance(value, str):
        items = [v for v in value.replace(";", ",").replace(" ", ",").split(",") if v.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    if not items:
        raise SpecError(field_name, f"no values given; {what}")
    parsed = [_int(field_name, v, minimum, what) for v in items]
    if len(set(parsed)) != len(parsed):
        dupes = sorted({v for v in parsed if parsed.count(v) > 1})
        raise SpecError(field_name, f"{dupes[0]} is listed twice; list each value once")
    return tuple(parsed)


def parse_batch_sizes(value: Any) -> tuple[int, ...]:
    what = f"batch sizes must be whole numbers from 1 to {MAX_BATCH_SIZE}, e.g. 8,16,32"
    sizes = _int_list("batch_sizes", value, 1, what)
    for s in sizes:
        if s > MAX_BATCH_SIZE:
            raise SpecError("batch_sizes", f"{s} is too large; {what}")
    return sizes


def parse_seeds(value: Any) -> tuple[int, ...]:
    what = f"seeds must be whole numbers from 0 to {SEED_LIMIT - 1} (2**32 - 1), e.g. 0,1,2"
    seeds = _int_list("seeds", value, 0, what)
    for s in seeds:
        if s >= SEED_LIMIT:
            raise SpecError("seeds", f"{s} is too large; {what}")
    return seeds


def parse_samples(value: Any) -> int:
    return _int("samples", value, 1, "the number of training samples must be a whole number >= 1")


def parse_val_samples(value: Any) -> int:
    return _int("val_samples", value, 0, "validation samples must be a whole number >= 0 (0 = none)")


def parse_epochs(value: Any) -> int:
    return _int("epochs", value, 1, "epochs must be a whole number >= 1")


MAX_ACCUMULATE = 1024


def parse_accumulate(value: Any) -> int:
    """Gradient accumulation: k micro-batches per optimizer update (1 = none); effective batch = batch size x k."""
    what = f"accumulate must be a whole number from 1 (no accumulation) to {MAX_ACCUMULATE}"
    return _int("accumulate", 1 if _blank(value) else value, 1, what, MAX_ACCUMULATE)


MAX_FUSED = 4096
XLA_AUTO = "auto"  # xla: compile only where the run's steps repay the compile (core/training/xla_choice.py)


def parse_fused(value: Any) -> int:
    """Training steps per call of the step function (1 = one step per call, the default loop)."""
    what = f"fused must be a whole number of steps per call from 1 (one step per call) to {MAX_FUSED}"
    return _int("fused", 1 if _blank(value) else value, 1, what, MAX_FUSED)


def parse_xla(value: Any) -> bool | str:
    """True, False or "auto" (XLA only where the run's steps repay the compile: core/training/xla_choice.py)."""
    if isinstance(value, str) and value.strip().lower() == XLA_AUTO:
        return XLA_AUTO
    try:
        return _bool("xla", False if _blank(value) else value)
    except SpecError:
        raise SpecError("xla", f"{value!r} is not allowed; use true, false or {XLA_AUTO}") from None


MAX_TF_THREADS = 1024


def parse_tf_threads(value: Any) -> int:
    """TensorFlow's intra- and inter-op threads in the training child (0 = TensorFlow's default: one per core)."""
    what = f"tf_threads must be a whole number of threads from 1 to {MAX_TF_THREADS}, or 0 for TensorFlow's default"
    return _int("tf_threads", 0 if _blank(value) else value, 0, what, MAX_TF_THREADS)


def parse_prepare_ahead(value: Any) -> bool:
    return _bool("prepare_ahead", False if _blank(value) else value)


def parse_abort_losers(value: Any) -> bool:
    return _bool("abort_losers", False if _blank(value) else value)


def parse_mixed_precision(value: Any) -> bool:
    return _bool("mixed_precision", False if _blank(value) else value)


def parse_budget_unit(value: Any) -> str:
    return _choice("budget_unit", value, BUDGET_UNITS)


def parse_budget_amount(unit: str, value: Any) -> int:
    """The budget's amount, with the unit's own name and message (the field is `epochs` in flat values)."""
    if unit == "epochs":
        return parse_epochs(value)
    what = f"the {unit} budget must be a whole number >= 1" + (" (optimizer steps)" if unit == "steps" else "")
    return _int(unit, value, 1, what)


def parse_target(value: Any) -> str | None:
    """A target as METRIC=VALUE (core/targets.py), stored in its canonical text; blank: no target."""
    if _blank(value):
        return None
    try:
        return parse_target_text(str(value)).text
    except TargetSyntaxError as e:
        raise SpecError("target", str(e)) from None


def parse_eval_every(value: Any) -> int | None:
    """Steps between evaluations (each epoch end is one too); blank: at epoch ends only."""
    if _blank(value):
        return None
    return _int("eval_every", value, 1, "evaluate every N optimizer steps, N a whole number >= 1 (empty = epoch ends)")


def parse_keep_training(value: Any) -> bool:
    return _bool("keep_training", value)


def _choice(field_name: str, value: Any, allowed: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in allowed:
        raise SpecError(field_name, f"{str(value)!r} is not known; choose one of {', '.join(allowed)}")
    return text


def parse_preset(value: Any) -> str:
    return _choice("preset", value, tuple(PRESETS))


def parse_workload(value: Any) -> str:
    return _choice("workload", value, WORKLOADS)


def parse_optimizer(value: Any) -> str:
    return _choice("optimizer", value, OPTIMIZERS)


def parse_lr(value: Any) -> float | None:
    if _blank(value):
        return None
    what = "the learning rate must be a number > 0, e.g. 0.001 (empty = the optimizer's default)"
    try:
        lr = float(value)
    except (TypeError, ValueError):
        raise SpecError("lr", f"{value!r} is not a number; {what}") from None
    if not math.isfinite(lr) or lr <= 0:
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


def parse_shuffle(value: Any) -> bool:
    return _bool("shuffle", value)


def _bool(field_name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise SpecError(field_name, f"{value!r} is not allowed; use true or false")


def parse_device(value: Any) -> str:
    text = str(value).strip().lower()
    what = "the device must be auto, cpu or gpu:N (N = 0, 1, ...)"
    if text in ("auto", "cpu"):
        return text
    if text.startswith("gpu:") and text[4:].isdigit():
        return f"gpu:{int(text[4:])}"
    if text == "gpu":
        return "gpu:0"
    raise SpecError("device", f"{value!r} is not known; {what}")


LOOPS = ("loop", "fit")
SYNC_MODES = ("every_step", "sampled")


def parse_loop(value: Any) -> str:
    """`loop` (BatchLab's instrumented loop, every step timed) or `fit` (the model's own fit, epochs timed)."""
    return _choice("loop", value, LOOPS)


def parse_sync(value: Any) -> str:
    """How often the instrumented loop waits for the device: `every_step` or `sampled` steps only."""
    return _choice("sync", str(value).strip().replace("-", "_"), SYNC_MODES)


def lr_find_rates(path: str, pick: str = "steepest") -> dict[int, float]:
    """Suggested rate per batch size of an lr-find file (core/sweep/lr_find.py), by the rule `pick` (LR_PICKS);
    SpecError (lr_from) if unusable."""
    from batchlab.core.sweep.lr_find import suggested_rates

    return suggested_rates(path, pick)


LR_PICKS = ("steepest", "min10")  # which suggestion of an lr-find file lr_from takes (core/lr_range.py)


def parse_lr_pick(value: Any) -> str:
    """With lr_from: `steepest` (the steepest fall of the smoothed loss) or `min10` (the lowest loss's rate / 10)."""
    if _blank(value):
        return "steepest"
    text = str(value).strip().lower().replace("/", "")
    return _choice("lr_pick", "min10" if text in ("min", "min10", "minimum10") else text, LR_PICKS)


def parse_lr_from(value: Any) -> str | None:
    """An lr-find run file whose suggested rate for each batch size is that run's rate; blank = use lr."""
    if _blank(value):
        return None
    path = _user_path(str(value).strip())
    if not os.path.isfile(path):
        raise SpecError("lr_from", f"file {path!r} does not exist; give a run file written by batchlab lr-find")
    return os.path.abspath(path)


def _float(field_name: str, value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SpecError(field_name, f"{value!r} is not a number; {what}") from None
    if not math.isfinite(number):
        raise SpecError(field_name, f"{value!r} is not allowed; {what}")
    return number


def parse_lr_rule(value: Any) -> str:
    """How the base rate scales with the batch size: constant (BLR), linear (LSR) or sqrt (SRSR)."""
    text = str(value).strip().lower()
    text = LR_RULE_ALIASES.get(text, text)
    if text not in LR_RULES:
        raise SpecError("lr_rule", f"{str(value)!r} is not known; choose constant (BLR), linear (LSR) or sqrt (SRSR)")
    return text


def parse_lr_base_batch(value: Any) -> int | None:
    """B0, the batch size at which the rate is `lr`; blank = the sweep's smallest batch size."""
    if _blank(value):
        return None
    what = "the base batch size B0 must be a whole number >= 1 (empty = the smallest batch size)"
    return _int("lr_base_batch", value, 1, what, MAX_BATCH_SIZE)


def parse_warmup(value: Any) -> float:
    what = "warmup must be a number >= 0 of warmup_unit (epochs or steps); 0 = no warmup"
    w = _float("warmup", value, what)
    if w < 0:
        raise SpecError("warmup", f"{value!r} is negative; {what}")
    return w


def parse_warmup_unit(value: Any) -> str:
    return _choice("warmup_unit", value, WARMUP_UNITS)


def parse_lr_schedule(value: Any) -> str:
    return _choice("lr_schedule", value, LR_SCHEDULES)


def parse_lr_decay_factor(value: Any) -> float:
    what = "the decay factor must be a number between 0 and 1 (exclusive), e.g. 0.1"
    f = _float("lr_decay_factor", value, what)
    if not 0.0 < f < 1.0:
        raise SpecError("lr_decay_factor", f"{value!r} is out of range; {what}")
    return f


def parse_lr_decay_every(value: Any) -> int:
    return _int("lr_decay_every", value, 1, "step decay's interval must be a whole number of epochs >= 1")


def parse_lr_patience(value: Any) -> int:
    return _int("lr_patience", value, 1, "patience must be a whole number of epochs >= 1")


def parse_nesterov(value: Any) -> bool:
    return _bool("nesterov", value)


def parse_weight_decay(value: Any) -> float | None:
    if _blank(value):
        return None
    what = f"weight decay must be a number >= 0 (used by {', '.join(WEIGHT_DECAY_OPTIMIZERS)}; empty = their default)"
    wd = _float("weight_decay", value, what)
    if wd < 0:
        raise SpecError("weight_decay", f"{value!r} is negative; {what}")
    return wd


def _user_path(text: str) -> str:
    """A path as the user typed it, with ~ expanded (a shell would have done it on a command line)."""
    return os.path.expanduser(text)


def parse_data(value: Any) -> str:
    """`bundled`, `bundled-large`, `keras:NAME`, or an existing .npz / .h5 / .hdf5 file (returned as an absolute path).

    The one check of a data source's name; core.datasets loads what this accepts.
    """
    text = BUNDLED_DATA if _blank(value) else str(value).strip()
    if text in BUNDLED_SOURCES:
        return text
    if text.startswith(KERAS_PREFIX):
        if text[len(KERAS_PREFIX) :] not in KERAS_DATASETS:
            allowed = ", ".join(f"{KERAS_PREFIX}{n}" for n in KERAS_DATASETS)
            raise SpecError("data", f"{text!r} is not a Keras dataset BatchLab knows; choose {allowed}")
        return text
    if not text.lower().endswith(DATA_FILE_SUFFIXES):
        raise SpecError(
            "data",
            f"{text!r} is not a data source; use bundled, bundled-large, keras:mnist, keras:fashion_mnist, "
            "keras:cifar10, a .npz/.h5/.hdf5 file with x_train and y_train, or a .csv table",
        )
    path = _user_path(text)
    if not os.path.isfile(path):
        raise SpecError("data", f"file {path!r} does not exist; use bundled or an existing .npz/.h5 file")
    return os.path.abspath(path)


def parse_model_file(value: Any) -> str | None:
    if _blank(value):
        return None
    text = str(value).strip()
    if not text.lower().endswith(".keras"):
        raise SpecError("model_file", f"{text!r} is not a .keras file; save your model with model.save('name.keras')")
    path = _user_path(text)
    if not os.path.isfile(path):
        raise SpecError("model_file", f"file {path!r} does not exist")
    return os.path.abspath(path)


def parse_scale(value: Any) -> float | None:
    """Divide the inputs by this number (e.g. 255 for uint8 pixels); empty or "none": use them as stored."""
    if _blank(value) or str(value).strip().lower() == "none":
        return None
    what = "the input scale must be a number > 0 that inputs are divided by, e.g. 255, or none"
    try:
        scale = float(value)
    except (TypeError, ValueError):
        raise SpecError("scale", f"{value!r} is not a number; {what}") from None
    if not math.isfinite(scale) or scale <= 0:
        raise SpecError("scale", f"{value!r} is not allowed; {what}")
    return scale


def parse_target_column(value: Any) -> str | None:
    """CSV data: the name of the target column, or several comma-separated for vector targets."""
    if _blank(value):
        return None
    names = [n.strip() for n in str(value).split(",")]
    if any(not n for n in names):
        raise SpecError("target_column", f"{value!r} has an empty column name; name CSV columns, e.g. price or x,y")
    if len(set(names)) != len(names):
        raise SpecError("target_column", f"{value!r} names a column twice; list each target column once")
    return ",".join(names)


def parse_val_fraction(value: Any) -> float:
    """CSV data: the fraction of rows, taken from the end of the file, used for validation."""
    what = "the validation fraction must be a number from 0 to 0.9 (0 = no validation), e.g. 0.2"
    try:
        fraction = float(value)
    except (TypeError, ValueError):
        raise SpecError("val_fraction", f"{value!r} is not a number; {what}") from None
    if not (0.0 <= fraction <= 0.9):
        raise SpecError("val_fraction", f"{value!r} is out of range; {what}")
    return fraction


def parse_noise_scale_every(value: Any) -> int | None:
    """Steps between gradient noise scale measurements; blank: not measured."""
    if _blank(value):
        return None
    what = "measure the gradient noise scale every N steps, N a whole number >= 1 (empty = not measured)"
    return _int("noise_scale_every", value, 1, what)


MAX_NOISE_SCALE_PARTS = 64


def parse_noise_scale_parts(value: Any) -> int:
    """Micro-batches a measured step's batch is split into (k >= 2: two batch sizes, B/k and B)."""
    what = f"the batch is split into k micro-batches, k a whole number from 2 to {MAX_NOISE_SCALE_PARTS}"
    return _int("noise_scale_parts", 4 if _blank(value) else value, 2, what, MAX_NOISE_SCALE_PARTS)


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
    f = _float("batch_growth_factor", value, what)
    if f <= 1.0:
        raise SpecError("batch_growth_factor", f"{value!r} is not above 1; {what}")
    return f


def parse_batch_growth_every(value: Any) -> int:
    return _int("batch_growth_every", value, 1, "grow's interval must be a whole number of epochs >= 1")


def _optional_batch(field_name: str, value: Any, what: str) -> int | None:
    if _blank(value):
        return None
    b = _int(field_name, value, 1, what)
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
    return _int("batch_patience", value, 1, "patience must be a whole number of evaluations >= 1")


FIELD_PARSERS: dict[str, Callable[[Any], Any]] = {
    "preset": parse_preset,
    "workload": parse_workload,
    "model_file": parse_model_file,
    "data": parse_data,
    "samples": parse_samples,
    "val_samples": parse_val_samples,
    "budget_unit": parse_budget_unit,
    "epochs": parse_epochs,
    "batch_sizes": parse_batch_sizes,
    "optimizer": parse_optimizer,
    "lr": parse_lr,
    "momentum": parse_momentum,
    "seeds": parse_seeds,
    "shuffle": parse_shuffle,
    "device": parse_device,
    "loop": parse_loop,
    "sync": parse_sync,
    "target": parse_target,
    "eval_every": parse_eval_every,
    "keep_training": parse_keep_training,
    "accumulate": parse_accumulate,
    "lr_from": parse_lr_from,
    "lr_rule": parse_lr_rule,
    "lr_base_batch": parse_lr_base_batch,
    "warmup": parse_warmup,
    "warmup_unit": parse_warmup_unit,
    "lr_schedule": parse_lr_schedule,
    "lr_decay_factor": parse_lr_decay_factor,
    "lr_decay_every": parse_lr_decay_every,
    "lr_patience": parse_lr_patience,
    "nesterov": parse_nesterov,
    "weight_decay": parse_weight_decay,
    "scale": parse_scale,
    "target_column": parse_target_column,
    "val_fraction": parse_val_fraction,
    "noise_scale_every": parse_noise_scale_every,
    "noise_scale_parts": parse_noise_scale_parts,
    "fused": parse_fused,
    "xla": parse_xla,
    "mixed_precision": parse_mixed_precision,
    "batch_schedule": parse_batch_schedule,
    "batch_growth_factor": parse_batch_growth_factor,
    "batch_growth_every": parse_batch_growth_every,
    "max_batch": parse_max_batch,
    "batch_switch_to": parse_batch_switch_to,
    "batch_patience": parse_batch_patience,
    "lr_pick": parse_lr_pick,
    "tf_threads": parse_tf_threads,
    "prepare_ahead": parse_prepare_ahead,
    "abort_losers": parse_abort_losers,
}


def _flatten_budget(d: Mapping[str, Any]) -> dict[str, Any]:
    """Spec values with a nested `budget` ({"unit", "amount"} or a Budget) as budget_unit and epochs."""
    values = dict(d)
    budget = values.pop("budget", None)
    if isinstance(budget, Budget):
        budget = asdict(budget)
    if isinstance(budget, Mapping):
        values["budget_unit"] = budget.get("unit")
        values["epochs"] = budget.get("amount")
    return values


def _spec_from_parsed(parsed: dict[str, Any]) -> SweepSpec:
    fields = dict(parsed)
    budget = Budget(unit=fields.pop("budget_unit"), amount=fields.pop("epochs"))
    return SweepSpec(budget=budget, **fields)


def preset_values(values: Mapping[str, Any], *, blank_means_default: bool = False) -> dict[str, Any]:
    """Every field's value: the named preset's (the default preset's if none is named), with `values` on top.

    The one way a preset and a user's values merge. A nested `budget` counts as budget_unit and
    epochs. With `blank_means_default`, None in `values` also takes the preset's value (an option
    not given); without it only absent fields do (a file's blank learning rate stays blank).
    Raises SpecError for an unknown preset.
    """
    given = _flatten_budget(values)
    preset = parse_preset(DEFAULT_PRESET if _blank(given.get("preset")) else given["preset"])
    merged = preset_defaults(preset)
    merged.update({k: v for k, v in given.items() if not (blank_means_default and v is None)})
    merged["preset"] = preset
    return merged


def _parse_all(
    values: Mapping[str, Any], blank_means_default: bool = True
) -> tuple[dict[str, Any], dict[str, SpecError]]:
    """Parse every field of `preset_values(values)`; return parsed values and errors by field."""
    errors: dict[str, SpecError] = {}
    if blank_means_default:
        values = _implied_by_model_file(values)
    for name in sorted(set(values) - set(FIELD_PARSERS) - {"budget"}):
        errors[name] = SpecError(name, f"unknown setting; known settings are {', '.join(FIELD_PARSERS)}")
    try:
        merged = preset_values(values, blank_means_default=blank_means_default)
    except SpecError as e:
        errors["preset"] = e
        merged = preset_values({**values, "preset": DEFAULT_PRESET}, blank_means_default=blank_means_default)
    parsed: dict[str, Any] = {}
    for name, parser in FIELD_PARSERS.items():
        if name in errors:
            continue
        try:
            parsed[name] = parser(merged.get(name))
        except SpecError as e:
            errors[name] = e
    unit = parsed.get("budget_unit", "epochs")
    if "epochs" in errors and unit != "epochs":  # the amount of a steps/examples budget: its own name and message
        try:
            parse_budget_amount(unit, merged.get("epochs"))
        except SpecError as e:
            errors["epochs"] = e
    _fit_to_data(parsed, errors, given=_given_fields(values, blank_means_default))
    _check_preset_fit(parsed, errors)
    _check_combinations(parsed, errors)
    _check_target(parsed, errors)
    return parsed, errors


def _given_fields(values: Mapping[str, Any], blank_means_default: bool) -> set[str]:
    """The fields the user set (an option given, a file's value): not absent, and not blank when blank means unset."""
    flat = _flatten_budget(values)
    return {k for k, v in flat.items() if not (blank_means_default and _blank(v))}


def _check_preset_fit(parsed: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """Data that contradicts the model its preset names (width, image shape, label range) is an error under
    "data" (core/preset_fit.py); another workload than the preset's is sized from the data."""
    data, preset, workload = parsed.get("data"), parsed.get("preset"), parsed.get("workload")
    if data is None or data in BUNDLED_SOURCES or preset is None or workload is None or "data" in errors:
        return
    from batchlab.core.datasets import array_shapes  # deferred: core.datasets imports this module
    from batchlab.core.preset_fit import preset_problem, promises_shape

    if not promises_shape(preset, workload):
        return  # sized from the data, or the user's model: no header to read on every edit
    try:
        shapes = None
        if not data.startswith(KERAS_PREFIX):
            shapes = array_shapes(data, parsed.get("target_column"), parsed.get("val_fraction", 0.0))
        problem = preset_problem(preset, workload, data, shapes)
        if problem:
            errors["data"] = SpecError("data", problem)
    except SpecError as e:
        if e.field == "data":  # (a CSV column the file lacks is already said under target_column)
            errors["data"] = e


def _implied_by_model_file(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """A .keras file named without a preset or workload means the user's-model preset and workload; a workload
    named without a preset, the preset of that workload sized from the data (core.presets.SIZED_FROM_DATA)."""
    if _blank(values.get("model_file")):
        workload = values.get("workload")
        if _blank(values.get("preset")) and not _blank(workload) and str(workload).strip() in SIZED_FROM_DATA:
            return {**values, "preset": str(workload).strip()}
        return values
    out = dict(values)
    if _blank(out.get("preset")):
        out["preset"] = USER_MODEL_PRESET
    if _blank(out.get("workload")):
        out["workload"] = USER_MODEL_WORKLOAD
    return out


def _fit_to_data(parsed: dict[str, Any], errors: dict[str, SpecError], given: set[str]) -> None:
    """For a data file: samples and val_samples not given take everything the file holds (and batch sizes
    not given, the preset's that fit it); given ones larger than what it holds are errors naming the
    available count (core.datasets.data_counts)."""
    data = parsed.get("data")
    if data is None or data in BUNDLED_SOURCES or data.startswith(KERAS_PREFIX):
        if parsed.get("target_column") and "target_column" not in errors:
            errors["target_column"] = SpecError(
                "target_column", "names the target column of CSV data; an .npz/.h5 file or a dataset has y_train"
            )
        return
    from batchlab.core.datasets import data_counts  # deferred: core.datasets imports this module

    for field_name in ("samples", "val_samples"):  # not given: they follow the file once it can be read
        if field_name not in given:
            errors.pop(field_name, None)
    is_csv = data.lower().endswith(CSV_SUFFIXES)
    if is_csv and not parsed.get("target_column"):
        errors.setdefault(
            "target_column",
            SpecError("target_column", "CSV data needs the target column named, e.g. --target-column price"),
        )
        return
    if not is_csv and parsed.get("target_column"):
        errors.setdefault(
            "target_column",
            SpecError("target_column", "names the target column of CSV data; an .npz/.h5 file has y_train"),
        )
        return
    try:
        counts = data_counts(data, parsed.get("target_column"), parsed.get("val_fraction", 0.0))
    except SpecError as e:
        errors.setdefault(e.field if e.field == "target_column" else "data", e)  # a column the CSV lacks
        return
    name = os.path.splitext(os.path.basename(data))[0]
    target = parsed.get("target")
    if counts.validation == 0 and target and "target" not in errors:
        metric = parse_target_text(target).metric
        # said here, before val_samples defaults to the 0 rows there are
        if metric in VALIDATION_METRICS or metric.startswith("val_"):
            errors["target"] = SpecError(
                "target",
                f"{target} needs validation, but data '{name}' has no test split (x_test); "
                "add x_test and y_test to the file or use a train_loss target",
            )
    for field_name, available, lowest, split in (
        ("samples", counts.train, 1, "training"),
        ("val_samples", counts.validation, 0, "validation"),
    ):
        if field_name not in given:  # absent, or left empty in the window: everything the file holds
            errors.pop(field_name, None)
            parsed[field_name] = max(available, lowest)
            if field_name == "samples" and "batch_sizes" not in given and "batch_sizes" in parsed:
                # the preset's batch sizes that fit the data (all of it as one batch if none does)
                fitting = tuple(b for b in parsed["batch_sizes"] if b <= parsed["samples"])
                parsed["batch_sizes"] = fitting or (parsed["samples"],)
        elif field_name in errors:
            continue
        elif parsed[field_name] > available and not (field_name == "val_samples" and available == 0):
            errors[field_name] = SpecError(
                field_name,
                f"{parsed[field_name]} {split} samples asked for but '{name}' has {available}; "
                f"use {lowest} to {available} (or leave it empty for all {available})",
            )


def _check_combinations(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """Checks that involve more than one field; each error is filed under the field to fix."""
    if "batch_sizes" in p and "samples" in p:
        too_big = [b for b in p["batch_sizes"] if b > p["samples"]]
        if too_big and "batch_sizes" not in errors:
            errors["batch_sizes"] = SpecError(
                "batch_sizes",
                f"{too_big[0]} is larger than the {p['samples']} training samples; "
                "use batch sizes up to the number of samples",
            )
    if p.get("workload") == "keras-file" and p.get("model_file") is None and "model_file" not in errors:
        errors["model_file"] = SpecError("model_file", "the keras-file workload needs a .keras model file")
    if p.get("optimizer") == MODEL_OPTIMIZER and p.get("workload") != "keras-file" and "optimizer" not in errors:
        errors["optimizer"] = SpecError(
            "optimizer", f"{MODEL_OPTIMIZER!r} (keep the model file's optimizer) only works with a .keras model file"
        )
    _check_accumulate(p, errors)
    _check_execution(p, errors)
    _check_lr_from(p, errors)
    _check_learning_rate(p, errors)
    _check_noise_scale(p, errors)
    _check_batch_schedule(p, errors)


def _check_noise_scale(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """The noise scale is measured by BatchLab's loop, on batches of at least one sample per micro-batch."""
    if p.get("noise_scale_every") is None or "noise_scale_every" in errors:
        return
    if p.get("loop") == "fit":
        errors["noise_scale_every"] = SpecError(
            "noise_scale_every",
            f"{p['noise_scale_every']} needs BatchLab's loop (it measures micro-batch gradients before a step); "
            "the fit engine cannot; use --loop loop or leave it empty",
        )
        return
    k = p.get("noise_scale_parts")
    small = [b for b in p.get("batch_sizes", ()) if isinstance(k, int) and b < k]
    if small and "noise_scale_parts" not in errors:
        errors["noise_scale_parts"] = SpecError(
            "noise_scale_parts",
            f"{k} micro-batches need batches of at least {k} samples, and batch size {small[0]} is smaller; "
            + (
                f"use noise_scale_parts up to {small[0]} or larger batch sizes"
                if small[0] >= 2
                else "a batch of 1 cannot be split: drop it or leave noise_scale_every empty"
            ),
        )


def _check_accumulate(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """Accumulation needs an optimizer BatchLab builds, and a budget that counts samples, not updates."""
    k = p.get("accumulate", 1)
    if not isinstance(k, int) or k <= 1 or "accumulate" in errors:
        return
    reason = None
    if p.get("optimizer") == MODEL_OPTIMIZER:
        reason = f"it needs an optimizer BatchLab builds, not {MODEL_OPTIMIZER!r} (the file's own); name one"
    elif p.get("budget_unit") == "steps" or p.get("target") is not None:
        reason = "a steps budget or a target counts updates, and a recorded step is one micro-batch; use epochs"
    if reason:
        errors["accumulate"] = SpecError("accumulate", f"{k} is not allowed here: {reason}")


MIXED_PRECISION_ON_CPU = (
    "unsupported on CPU: float16 is emulated there and slower than float32; use a GPU (device auto or gpu:N) "
    "or leave mixed precision off"
)


def _check_execution(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """Fused steps need BatchLab's loop (fit has steps_per_execution, which averages the losses); mixed precision
    needs a GPU and a model BatchLab builds (a .keras file keeps the dtypes it was saved with)."""
    k = p.get("fused", 1)
    if isinstance(k, int) and k > 1 and "fused" not in errors:
        if p.get("loop") == "fit":
            errors["fused"] = SpecError(
                "fused",
                f"{k} is not allowed with loop fit: fit's own steps_per_execution reports one mean loss per call; "
                "use loop loop (every step's loss recorded) or fused 1",
            )
        elif p.get("noise_scale_every") is not None:
            errors["fused"] = SpecError(
                "fused",
                f"{k} is not allowed with noise_scale_every: the noise scale is measured between single steps; "
                "use fused 1 or leave noise_scale_every empty",
            )
        elif p.get("sync") not in (None, "every_step"):
            errors["fused"] = SpecError(
                "fused",
                f"{k} is not allowed with sync {p['sync']}: a fused call is timed as a whole (one sync per call); "
                "use sync every_step or fused 1",
            )
    if p.get("prepare_ahead") and "prepare_ahead" not in errors and isinstance(k, int) and k <= 1:
        errors["prepare_ahead"] = SpecError(
            "prepare_ahead",
            "true is not allowed with fused 1: a run is prepared ahead by a first fused call (its trace and compile); "
            "use fused 2 or more, or prepare_ahead false",
        )
    if p.get("mixed_precision") and "mixed_precision" not in errors:
        if p.get("device") == "cpu":
            errors["mixed_precision"] = SpecError("mixed_precision", MIXED_PRECISION_ON_CPU)
        elif p.get("workload") == "keras-file":
            errors["mixed_precision"] = SpecError(
                "mixed_precision",
                "applies to the built-in workloads; a .keras file trains with the dtypes it was saved with "
                "(save it under keras.mixed_precision.set_global_policy('mixed_float16') instead)",
            )


def _check_lr_from(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """An lr-find file that has a suggested rate for every batch size of the sweep, for an optimizer BatchLab builds."""
    if not p.get("lr_from") or "lr_from" in errors:
        return
    if p.get("optimizer") == MODEL_OPTIMIZER:
        errors["lr_from"] = SpecError(
            "lr_from", "needs an optimizer BatchLab builds; with optimizer 'model' the model file's own rate is used"
        )
        return
    if p.get("lr_rule", "constant") != "constant" and "lr_rule" not in errors:
        errors["lr_rule"] = SpecError(
            "lr_rule",
            f"{p['lr_rule']!r} would scale rates already found per batch size by lr_from; "
            "use lr_rule constant with lr_from (schedules still apply)",
        )
        return
    try:
        rates = lr_find_rates(p["lr_from"], p.get("lr_pick", "steepest"))
    except SpecError as e:
        errors["lr_from"] = e
        return
    missing = [b for b in p.get("batch_sizes", ()) if b not in rates]
    if missing:
        held = ", ".join(map(str, rates)) or "none"
        errors["lr_from"] = SpecError(
            "lr_from",
            f"batch size {missing[0]} has no {p.get('lr_pick', 'steepest')} rate in {p['lr_from']} "
            f"(it has batch sizes {held}); "
            "run batchlab lr-find with these batch sizes or drop that batch size",
        )


def _budget_steps(p: dict[str, Any], batch_size: int) -> int:
    """Optimizer steps in one run's budget at this batch size (with a target: the most it may train)."""
    return Budget(p.get("budget_unit", "epochs"), p["epochs"]).steps(p["samples"], batch_size)


def _check_learning_rate(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """The learning-rate rule, schedule and optimizer settings against each other and the budget."""

    def fail(name: str, message: str) -> None:
        if name not in errors:
            errors[name] = SpecError(name, message)

    shaped = {
        name: p.get(name)
        for name, plain in (("lr_rule", "constant"), ("lr_schedule", "constant"), ("warmup", 0.0))
        if name in p and p[name] != plain
    }
    for name, value in shaped.items():
        if p.get("optimizer") == MODEL_OPTIMIZER:
            fail(
                name,
                f"{value!r} needs an optimizer BatchLab builds; with optimizer 'model' the model file's own rate "
                "is used; name an optimizer (e.g. sgd or adam) or set it back to its default",
            )
        elif "lr" in p and p["lr"] is None and not p.get("lr_from"):
            fail("lr", f"{name}={value!r} needs a base learning rate lr0; give lr, e.g. 0.001")
    if (p.get("accumulate") or 1) > 1 and p.get("lr_rule", "constant") != "constant":
        fail(
            "lr_rule",
            f"{p['lr_rule']!r} with accumulate {p['accumulate']} is not supported yet (the update's batch is "
            "batch size x accumulate); use lr_rule constant, or accumulate 1",
        )
    if p.get("lr_schedule") == "plateau" and p.get("val_samples") == 0:
        fail("lr_schedule", "'plateau' lowers the rate when the validation loss stalls; it needs val_samples > 0")
    if p.get("warmup") and p.get("warmup_unit") == "steps" and not float(p["warmup"]).is_integer():
        fail("warmup", f"{p['warmup']!r} is not a whole number of steps; use whole steps or warmup_unit epochs")
    if p.get("warmup") and all(k in p for k in ("warmup_unit", "batch_sizes", "epochs", "samples")):
        for b in sorted(p["batch_sizes"], reverse=True):  # the largest batch has the fewest steps
            spe = math.ceil(p["samples"] / b)
            total = _budget_steps(p, b)
            if warmup_steps(p["warmup"], p["warmup_unit"], spe) >= total:
                fail(
                    "warmup",
                    f"{p['warmup']:g} {p['warmup_unit']} is not shorter than the budget of batch size {b} "
                    f"({total} steps, {p['epochs']} {p.get('budget_unit', 'epochs')}); "
                    "use a shorter warmup or a longer budget",
                )
                break
    if p.get("warmup") and p.get("lr_rule") == "constant":
        fail(
            "warmup",
            f"{p['warmup']:g} {p.get('warmup_unit', 'epochs')} has nothing to ramp: warmup rises from lr to the "
            "rule's rate for the batch size, and with lr_rule constant they are equal; use lr_rule linear or sqrt, "
            "or warmup 0",
        )
    optimizer = p.get("optimizer")
    if p.get("nesterov") and optimizer is not None:
        if optimizer not in NESTEROV_OPTIMIZERS:
            fail("nesterov", f"Nesterov momentum applies to {', '.join(NESTEROV_OPTIMIZERS)}, not {optimizer!r}")
        elif p.get("momentum") == 0:
            fail("nesterov", "Nesterov momentum needs momentum > 0, e.g. 0.9")
    if p.get("weight_decay") is not None and optimizer is not None and optimizer not in WEIGHT_DECAY_OPTIMIZERS:
        fail(
            "weight_decay",
            f"{p['weight_decay']!r} is not used by {optimizer!r}; weight decay applies to "
            f"{', '.join(WEIGHT_DECAY_OPTIMIZERS)} (empty for the others)",
        )


def _check_batch_schedule(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """A batch schedule the runs can follow: batches that fit the data, a change inside the budget, a rate to decay."""
    schedule = p.get("batch_schedule", "constant")
    if "batch_schedule" in errors:
        return
    for name, user in (("max_batch", "grow"), ("batch_switch_to", "two_phase")):
        if p.get(name) is not None and schedule != user and name not in errors:
            errors[name] = SpecError(
                name, f"{p[name]} applies to batch_schedule {user} only; set batch_schedule {user} or leave it empty"
            )
    if schedule == "constant":
        return

    def fail(name: str, message: str) -> None:
        if name not in errors:
            errors[name] = SpecError(name, message)

    sizes = p.get("batch_sizes") or ()
    samples = p.get("samples")
    if p.get("loop") == "fit":
        fail("batch_schedule", f"{schedule!r} needs loop 'loop': the fit engine trains every epoch at one batch size")
    if (p.get("accumulate") or 1) > 1:
        fail("batch_schedule", f"{schedule!r} with accumulate {p['accumulate']} is not supported; use accumulate 1")
    if (p.get("fused") or 1) > 1:
        fail("batch_schedule", f"{schedule!r} with fused {p['fused']} is not supported (yet); use fused 1")
    lr_schedule = p.get("lr_schedule", "constant")
    if schedule == "grow":
        if p.get("optimizer") == MODEL_OPTIMIZER or (p.get("lr") is None and not p.get("lr_from") and "lr" in p):
            fail(
                "batch_schedule",
                "'grow' decays the rate once the batch reaches max_batch, so it needs a rate BatchLab sets: "
                "give lr and an optimizer BatchLab builds (e.g. sgd)",
            )
        if lr_schedule != "constant":
            fail(
                "lr_schedule",
                f"{lr_schedule!r} with batch_schedule grow: grow takes the place of the rate's decay (the rate "
                "decays only once the batch reaches max_batch); use lr_schedule constant",
            )
        top = p.get("max_batch")
        if top is not None and samples is not None and top > samples:
            fail(
                "max_batch",
                f"{top} is larger than the {samples} training samples; use at most {samples} "
                "(empty = the training samples)",
            )
        elif top is not None and sizes and top < max(sizes):
            fail("max_batch", f"{top} is smaller than batch size {max(sizes)}; use at least the largest batch size")
        every = p.get("batch_growth_every")
        if isinstance(every, int) and samples and "epochs" in p:
            for b in sorted(sizes):  # the smallest batch has the most steps per epoch
                total = _budget_steps(p, b)
                if total <= every * math.ceil(samples / b):
                    fail(
                        "batch_growth_every",
                        f"{every} epochs: the first change (at epoch {every}) is beyond the budget of batch size {b} "
                        f"({total} steps, {p['epochs']} {p.get('budget_unit', 'epochs')}); "
                        "use fewer epochs between changes or a longer budget",
                    )
                    break
    if schedule == "two_phase":
        if lr_schedule in ("step", "cosine"):
            fail(
                "lr_schedule",
                f"{lr_schedule!r} counts steps of one batch size, and two_phase changes the steps per epoch; "
                "use lr_schedule constant or plateau with batch_schedule two_phase",
            )
        if p.get("val_samples") == 0:
            fail("batch_schedule", "'two_phase' switches when the validation loss stalls; it needs val_samples > 0")
        to = p.get("batch_switch_to")
        if to is None:
            if "batch_switch_to" not in errors:
                fail("batch_switch_to", "two_phase needs the larger batch it switches to, e.g. 512")
        elif samples is not None and to > samples:
            fail("batch_switch_to", f"{to} is larger than the {samples} training samples; use at most {samples}")
        elif sizes and to <= max(sizes):
            fail(
                "batch_switch_to",
                f"{to} is not larger than batch size {max(sizes)}; two_phase switches to a larger batch: "
                f"use more than {max(sizes)}",
            )


def _check_target(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    """A target (and budget) the run can meet: its metric exists for the task, the engine supports it."""
    target = parse_target_text(p["target"]) if p.get("target") else None
    if target is not None and "target" not in errors:
        if target.metric in ACCURACY_METRICS and p.get("workload") == "autoencoder":
            errors["target"] = SpecError(
                "target",
                f"{target.text}: the autoencoder has no accuracy, so this target can never be met; "
                "use a val_loss or train_loss target",
            )
        elif target.metric not in TARGET_METRICS and _model_metric_error(p, target.metric):
            errors["target"] = SpecError("target", f"{target.text}: {_model_metric_error(p, target.metric)}")
        elif target.metric.startswith("val_") and p.get("val_samples") == 0:
            errors["target"] = SpecError(
                "target",
                f"{target.text} needs validation, but val_samples is 0; set val_samples above 0 "
                "or use a train_loss target",
            )
        elif target.metric.endswith("_loss") and target.value <= 0 and p.get("workload") != "keras-file":
            errors["target"] = SpecError(
                "target", f"{target.text} can never be met: this workload's loss is never below 0; use a value above 0"
            )
    if p.get("keep_training") and p.get("target") is None and "target" not in errors:
        errors["keep_training"] = SpecError(
            "keep_training", "only applies with a target (train on after meeting it); give a target or leave it off"
        )
    if p.get("abort_losers") and p.get("target") is None and "target" not in errors:
        errors["abort_losers"] = SpecError(
            "abort_losers", "only applies with a target (it stops runs that cannot reach it first); give a target"
        )
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
            errors["loop"] = SpecError(
                "loop",
                f"the fit engine trains whole epochs and has no evaluation points, so it cannot take {asks[0]}; "
                "use --loop loop (BatchLab's loop supports targets, eval_every and steps/examples budgets)",
            )


def _model_metric_error(p: dict[str, Any], metric: str) -> str | None:
    """Why a val_NAME target of a compiled metric cannot be measured for this run; None when it can
    (or when the model file itself is the problem, said under its own field)."""
    builtin = ", ".join(TARGET_METRICS)
    if p.get("workload") != "keras-file":
        return f"{metric} would be a compiled metric of your own model (--model); this workload has {builtin}"
    if not p.get("model_file"):
        return None
    from batchlab.core.model_file import cached_model_info  # deferred: core.model_file imports this module

    try:
        info = cached_model_info(p["model_file"])
    except SpecError:
        return None
    names = [f"val_{m}" for m in info.metrics]
    if metric in names:
        return None
    have = f"its compiled metrics are {', '.join(names)}" if names else "it has no compiled metrics"
    return f"{metric} is not a metric of model '{info.name}': {have} (besides {builtin})"


def spec_errors(values: Mapping[str, Any]) -> dict[str, SpecError]:
    """All problems with these values, by field (each a SpecError); empty when they make a valid spec."""
    return _parse_all(values)[1]


def build_spec(values: Mapping[str, Any]) -> SweepSpec:
    """Turn user values (strings or native types; None = the preset's value) into a validated spec.

    Raises the SpecError of the first problem found, in field order.
    """
    parsed, errors = _parse_all(values)
    if errors:
        raise next(iter(errors.values()))
    return _spec_from_parsed(parsed)


def with_overrides(spec: SweepSpec, **changes: Any) -> SweepSpec:
    """A copy of a valid spec with some fields changed (re-validated; other values kept exactly)."""
    values = spec.flat()
    values.update(changes)
    parsed, errors = _parse_all(values, blank_means_default=False)
    if errors:
        raise next(iter(errors.values()))
    return _spec_from_parsed(parsed)


__all__ = [
    "Budget",
    "FIELD_PARSERS",
    "OPTIMIZERS",
    "RunSpec",
    "SpecError",
    "SweepSpec",
    "Target",
    "build_spec",
    "preset_values",
    "replace",
    "spec_errors",
    "with_overrides",
]
