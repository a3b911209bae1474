"""Which settings differ between sweeps shown side by side (the compare banner and the CSV's context).

Qt-free: takes spec dicts as run files store them (SweepSpec.to_dict(), budget nested) and says,
per setting, what each sweep used. A comparison of a 1-epoch sweep with a 10-epoch one is then
never silent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from batchlab.core import settings

# Settings listed first when they differ (the ones that change what a curve means); the rest follow by name.
LEADING = ("preset", "workload", "model_file", "data", "samples", "val_samples", "epochs", "optimizer", "lr")
NOT_SETTINGS = ("out",)  # where a file was written says nothing about what was measured


def flat_settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A stored spec as one level of settings: the nested budget becomes `epochs` (and its unit if not epochs)."""
    values = {k: v for k, v in spec.items() if k not in NOT_SETTINGS}
    budget = values.pop("budget", None)
    if isinstance(budget, Mapping):
        values["epochs"] = budget.get("amount")
        if budget.get("unit") not in (None, "epochs"):
            values["budget_unit"] = budget.get("unit")
    return values


def show_value(value: Any) -> str:
    """A setting as a person reads it: lists comma-separated, None as "default"."""
    if value is None or value == "":
        return "default"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(show_value(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def spec_differences(specs: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """setting -> {sweep name: value} for every setting not the same in all of these sweeps.

    A sweep without a spec (an empty dict, e.g. a file still starting) is left out; with fewer
    than two specs nothing differs. Settings come in LEADING order, then alphabetically.
    """
    flat = {name: flat_settings(spec) for name, spec in specs.items() if spec}
    if len(flat) < 2:
        return {}
    keys = {key for values in flat.values() for key in values}
    order = [k for k in LEADING if k in keys] + sorted(keys - set(LEADING))
    defaults = settings.defaults()  # a file from before a setting existed: the value it trained with
    out: dict[str, dict[str, Any]] = {}
    for key in order:
        seen = {name: values[key] if key in values else defaults.get(key) for name, values in flat.items()}
        if len({show_value(v) for v in seen.values()}) > 1:
            out[key] = seen
    return out


def differences_text(differences: Mapping[str, Mapping[str, Any]], order: list[str] | None = None) -> list[str]:
    """One line per sweep: "name: epochs 1, optimizer adam" (empty when nothing differs)."""
    names = order or list(dict.fromkeys(name for seen in differences.values() for name in seen))
    lines = []
    for name in names:
        parts = [f"{key} {show_value(seen.get(name))}" for key, seen in differences.items() if name in seen]
        if parts:
            lines.append(f"{name}: {', '.join(parts)}")
    return lines
