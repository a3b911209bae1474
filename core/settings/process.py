"""Process policy: how the sweep's training processes are prepared (core/sweep/, core/training/ahead.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.presets import DEFAULT_PRESET, preset_defaults
from batchlab.core.settings.base import Setting, SettingsGroup, blank, boolean, fail

DEFAULTS = preset_defaults(DEFAULT_PRESET)


@dataclass(frozen=True)
class ProcessSettings:
    # fused runs on a Linux CPU: the next run's child builds, traces and compiles while this run trains
    prepare_ahead: bool = DEFAULTS["prepare_ahead"]


def parse_prepare_ahead(value: Any) -> bool:
    return boolean("prepare_ahead", False if blank(value) else value)


def _check_prepare_ahead(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    k = p.get("fused", 1)
    if p.get("prepare_ahead") and isinstance(k, int) and k <= 1:
        fail(
            errors,
            "prepare_ahead",
            "true is not allowed with fused 1: a run is prepared ahead by a first fused call (its trace and compile); "
            "use fused 2 or more, or prepare_ahead false",
        )


GROUP = SettingsGroup(
    name="process",
    title="Process policy",
    values=ProcessSettings,
    settings=(
        Setting(
            "prepare_ahead",
            "bool",
            parse_prepare_ahead,
            "with --fused on a Linux CPU: the next run's process builds its model and traces (and compiles) its "
            "fused call while the current run trains, then waits for its turn (recorded as prepared_ahead_s)",
            option="--prepare-ahead",
        ),
    ),
    checks=(_check_prepare_ahead,),
    form=False,  # not in the window yet
)
