"""The sweep spec: what to measure, validated once for the CLI and the GUI alike.

A spec is built from a preset plus the user's overrides. It is a composition of one frozen value object
per settings group (core/settings/: each group owns its fields, parsers, checks, options, form fields and
training hooks); this module merges a preset with the user's values, runs every group's parsers, the
checks that read files (core/spec_checks.py) and the groups' checks, and builds the spec. Every
value a user can type goes through one parser, so the command line and the window show the same message
for the same mistake. Nothing here imports TensorFlow or Qt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from batchlab.core import settings as registry
from batchlab.core.errors import SpecError
from batchlab.core.presets import DEFAULT_PRESET, SIZED_FROM_DATA, preset_defaults
from batchlab.core.settings.base import blank
from batchlab.core.settings.budget import BUDGET_UNITS, MAX_BATCH_SIZE, Budget, parse_batch_sizes, parse_budget_amount
from batchlab.core.settings.data import (
    BUNDLED_DATA,
    BUNDLED_LARGE_DATA,
    BUNDLED_SOURCES,
    CSV_SUFFIXES,
    KERAS_DATASETS,
    KERAS_PREFIX,
    NPZ_SUFFIXES,
    SEED_LIMIT,
    USER_MODEL_PRESET,
    USER_MODEL_WORKLOAD,
    parse_preset,
)
from batchlab.core.settings.data import checked_data_file as parse_data
from batchlab.core.settings.execution import LOOPS, MIXED_PRECISION_ON_CPU, SYNC_MODES, XLA_AUTO
from batchlab.core.settings.optimizer import (
    MODEL_OPTIMIZER,
    MOMENTUM_OPTIMIZERS,
    NESTEROV_OPTIMIZERS,
    OPTIMIZER_CLASSES,
    OPTIMIZERS,
    WEIGHT_DECAY_OPTIMIZERS,
)
from batchlab.core.spec_checks import check_files, lr_find_rates
from batchlab.core.targets import Target
from batchlab.core.targets import parse_target as parse_target_text

_UNSET: Any = object()


class SweepSpec:
    """Everything that defines a sweep: one frozen value object per settings group (`group(name)`), its
    fields readable as attributes of the spec (`spec.lr`, `spec.budget`); JSON-serialisable (`to_dict`) and
    stored in the run file. `SweepSpec(**values)` takes parsed values (the defaults: the default preset's);
    build_spec parses and checks what a user typed."""

    __slots__ = ("_groups", "_home", "_rates")

    def __init__(self, **values: Any) -> None:
        budget = values.pop("budget", None)
        if isinstance(budget, Budget):
            values.setdefault("budget_unit", budget.unit)
            values.setdefault("epochs", budget.amount)
        groups: dict[str, Any] = {}
        for g in registry.groups():
            mine = {k: values.pop(k) for k in list(values) if k in g.parsers}
            groups[g.name] = g.build({**g.flat(g.values()), **mine}) if mine else g.values()
        if values:
            raise TypeError(f"SweepSpec() got unknown settings: {', '.join(sorted(values))}")
        object.__setattr__(self, "_groups", groups)
        home = {name: values for values in groups.values() for name in type(values).__dataclass_fields__}
        object.__setattr__(self, "_home", home)  # each field's group values, for attribute reads
        object.__setattr__(self, "_rates", None)

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(object.__getattribute__(self, "_home")[name], name)
        except (KeyError, AttributeError):
            raise AttributeError(f"SweepSpec has no setting {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"SweepSpec is frozen; build a new one (with_overrides) to change {name!r}")

    def __reduce__(self):  # pickle: rebuilt from its values (immutable, so copies are the spec itself)
        return (_spec_from_parsed, (self.flat(),))

    def __copy__(self) -> SweepSpec:
        return self

    def __deepcopy__(self, memo: dict) -> SweepSpec:
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SweepSpec) and self._groups == other._groups

    def __hash__(self) -> int:
        return hash(tuple(self._groups.values()))

    def __repr__(self) -> str:
        return f"SweepSpec({', '.join(repr(v) for v in self._groups.values())})"

    def group(self, name: str) -> Any:
        """The frozen values of one settings group, e.g. spec.group("execution").fused."""
        return self._groups[name]

    @property
    def groups(self) -> Mapping[str, Any]:
        return dict(self._groups)

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

    def run_rates(self) -> dict[int, float | None]:
        """Each batch size's learning rate: with lr_from, the lr-find file's suggestion (the file read once per
        spec, in the parent), else the spec's lr."""
        if self._rates is None:
            if self.lr_from:
                rates = lr_find_rates(self.lr_from, self.lr_pick)
                found = {b: rates.get(b) for b in self.batch_sizes}
            else:
                found = {b: self.lr for b in self.batch_sizes}
            object.__setattr__(self, "_rates", found)
        return self._rates

    def runs(self) -> list[RunSpec]:
        """One run per (seed, batch size); seed-major so the first pass covers every batch size."""
        rates = self.run_rates()
        out = []
        for seed in self.seeds:
            for batch in self.batch_sizes:
                out.append(RunSpec(index=len(out), batch_size=batch, seed=seed, sweep=self, lr=rates[batch]))
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready values (the budget nested); `from_dict` rebuilds exactly this spec from it."""
        d: dict[str, Any] = {}
        for values in self._groups.values():
            d.update(asdict(values))
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def flat(self) -> dict[str, Any]:
        """The spec as field values by parser name (the budget as budget_unit and epochs)."""
        out: dict[str, Any] = {}
        for g in registry.groups():
            if g.name in self._groups:
                out.update(g.flat(self._groups[g.name]))
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepSpec:
        """Rebuild the spec `to_dict` wrote (e.g. a run file's `spec`), validating every field and the files.

        No preset default is applied to a value that is present: a blank learning rate stays blank.
        A field a file from an older version lacks takes its preset's value.
        """
        parsed, errors = _parse_all(d, blank_means_default=False)
        if errors:
            raise next(iter(errors.values()))
        return _spec_from_parsed(parsed)

    @classmethod
    def restore(cls, d: Mapping[str, Any]) -> SweepSpec:
        """The spec the parent checked, from its `to_dict` (the training child's copy): each value through its
        group's parser (types only), no checks among them and no file read."""
        merged = preset_values(d)
        parsers = registry.field_parsers()
        return _spec_from_parsed({name: parse(merged.get(name)) for name, parse in parsers.items()})


def _group_field(group: str, name: str) -> property:
    return property(lambda self: getattr(self._groups[group], name), doc=f"The {group} group's {name}.")


for _group in registry.groups():  # the built-in groups' fields as properties (a group added later: __getattr__)
    for _name in registry.value_fields(_group):
        if not hasattr(SweepSpec, _name):
            setattr(SweepSpec, _name, _group_field(_group.name, _name))


@dataclass(frozen=True)
class RunSpec:
    """One run: a sweep's settings at one batch size and seed, and its learning rate worked out by the parent
    (the spec's lr, or with lr_from the lr-find suggestion for its batch size; None: the optimizer's own)."""

    index: int
    batch_size: int
    seed: int
    sweep: SweepSpec
    lr: float | None = field(default=_UNSET)

    def __post_init__(self) -> None:
        if self.lr is _UNSET:
            object.__setattr__(self, "lr", self.sweep.run_rates().get(self.batch_size, self.sweep.lr))

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "lr": self.lr,
            "sweep": self.sweep.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSpec:
        """The run the parent sent (to_dict): its values as they are, the spec not checked again."""
        return cls(
            index=int(d["index"]),
            batch_size=int(d["batch_size"]),
            seed=int(d["seed"]),
            sweep=SweepSpec.restore(d["sweep"]),
            lr=None if d.get("lr") is None else float(d["lr"]),
        )


# ---------------------------------------------------------------- parsing a spec


def _field_parsers() -> dict[str, Callable[[Any], Any]]:
    return registry.field_parsers()


class _Parsers(Mapping):
    """FIELD_PARSERS: every registered setting's parser by name (a live view of core.settings)."""

    def __getitem__(self, name: str) -> Callable[[Any], Any]:
        return _field_parsers()[name]

    def __iter__(self):
        return iter(_field_parsers())

    def __len__(self) -> int:
        return len(_field_parsers())


FIELD_PARSERS: Mapping[str, Callable[[Any], Any]] = _Parsers()


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
    return SweepSpec(**parsed)


def preset_values(values: Mapping[str, Any], *, blank_means_default: bool = False) -> dict[str, Any]:
    """Every field's value: the named preset's (the default preset's if none is named), with `values` on top.

    The one way a preset and a user's values merge. A nested `budget` counts as budget_unit and
    epochs. With `blank_means_default`, None in `values` also takes the preset's value (an option
    not given); without it only absent fields do (a file's blank learning rate stays blank).
    A field no preset names takes its group's default. Raises SpecError for an unknown preset.
    """
    given = _flatten_budget(values)
    preset = parse_preset(DEFAULT_PRESET if blank(given.get("preset")) else given["preset"])
    merged = registry.defaults()
    merged.update(preset_defaults(preset))
    merged.update({k: v for k, v in given.items() if not (blank_means_default and v is None)})
    merged["preset"] = preset
    return merged


def _parse_all(
    values: Mapping[str, Any], blank_means_default: bool = True
) -> tuple[dict[str, Any], dict[str, SpecError]]:
    """Parse every field of `preset_values(values)`, check the files they name, then the groups' checks;
    return parsed values and errors by field."""
    errors: dict[str, SpecError] = {}
    parsers = registry.field_parsers()
    if blank_means_default:
        values = _implied_by_model_file(values)
    for name in sorted(set(values) - set(parsers) - {"budget"}):
        errors[name] = SpecError(name, f"unknown setting; known settings are {', '.join(parsers)}")
    try:
        merged = preset_values(values, blank_means_default=blank_means_default)
    except SpecError as e:
        errors["preset"] = e
        merged = preset_values({**values, "preset": DEFAULT_PRESET}, blank_means_default=blank_means_default)
    parsed: dict[str, Any] = {}
    for name, parser in parsers.items():
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
    check_files(parsed, errors, given=_given_fields(values, blank_means_default))
    for check in registry.checks():
        check(parsed, errors)
    return parsed, errors


def _given_fields(values: Mapping[str, Any], blank_means_default: bool) -> set[str]:
    """The fields the user set (an option given, a file's value): not absent, and not blank when blank means unset."""
    flat = _flatten_budget(values)
    return {k for k, v in flat.items() if not (blank_means_default and blank(v))}


def _implied_by_model_file(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """A .keras file named without a preset or workload means the user's-model preset and workload; a workload
    named without a preset, the preset of that workload sized from the data (core.presets.SIZED_FROM_DATA)."""
    if blank(values.get("model_file")):
        workload = values.get("workload")
        if blank(values.get("preset")) and not blank(workload) and str(workload).strip() in SIZED_FROM_DATA:
            return {**values, "preset": str(workload).strip()}
        return values
    out = dict(values)
    if blank(out.get("preset")):
        out["preset"] = USER_MODEL_PRESET
    if blank(out.get("workload")):
        out["workload"] = USER_MODEL_WORKLOAD
    return out


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
    "BUDGET_UNITS",
    "BUNDLED_DATA",
    "BUNDLED_LARGE_DATA",
    "BUNDLED_SOURCES",
    "CSV_SUFFIXES",
    "KERAS_DATASETS",
    "KERAS_PREFIX",
    "LOOPS",
    "MOMENTUM_OPTIMIZERS",
    "NESTEROV_OPTIMIZERS",
    "NPZ_SUFFIXES",
    "OPTIMIZER_CLASSES",
    "SEED_LIMIT",
    "SYNC_MODES",
    "WEIGHT_DECAY_OPTIMIZERS",
    "parse_batch_sizes",
    "parse_data",
    "Budget",
    "FIELD_PARSERS",
    "MAX_BATCH_SIZE",
    "MIXED_PRECISION_ON_CPU",
    "MODEL_OPTIMIZER",
    "OPTIMIZERS",
    "RunSpec",
    "SpecError",
    "SweepSpec",
    "Target",
    "XLA_AUTO",
    "build_spec",
    "lr_find_rates",
    "preset_values",
    "spec_errors",
    "with_overrides",
]
