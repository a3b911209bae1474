"""The settings groups of a sweep, one module each, and the registry that lists them.

`SweepSpec` (core/spec.py) is a composition of one frozen value object per group; the command line
(`batchlab sweep --help` shows one section per group), the window's form and the training child's hooks
are built from this registry. A new setting goes into its group's module (docs/contributing.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

from batchlab.core.settings import (
    batch_schedule,
    budget,
    data,
    execution,
    learning_rate,
    measurement,
    optimizer,
    placement,
    process,
)
from batchlab.core.settings.base import Check, FormField, HookFactory, Setting, SettingsGroup

_GROUPS: list[SettingsGroup] = [
    data.GROUP,
    budget.GROUP,
    optimizer.GROUP,
    learning_rate.GROUP,
    batch_schedule.GROUP,
    execution.GROUP,
    measurement.GROUP,
    process.GROUP,
    placement.GROUP,
]


_cache: dict[str, Any] = {}  # field_parsers and defaults, built once per set of groups


def groups() -> tuple[SettingsGroup, ...]:
    """Every registered group, in the order the command line and the form show them."""
    return tuple(_GROUPS)


def group(name: str) -> SettingsGroup:
    for g in _GROUPS:
        if g.name == name:
            return g
    raise KeyError(name)


def register(new: SettingsGroup) -> None:
    """Add a group (its settings become spec fields, options, form fields; its hooks join every run)."""
    taken = {s.name for g in _GROUPS for s in g.settings} | {f for g in _GROUPS for f in value_fields(g)}
    clash = sorted(taken & ({s.name for s in new.settings} | set(value_fields(new))))
    if any(g.name == new.name for g in _GROUPS) or clash:
        raise ValueError(f"settings group {new.name!r} clashes with a registered one ({', '.join(clash) or 'name'})")
    _GROUPS.append(new)
    _cache.clear()


def unregister(name: str) -> None:
    _GROUPS[:] = [g for g in _GROUPS if g.name != name]
    _cache.clear()


@contextmanager
def registered(new: SettingsGroup) -> Iterator[SettingsGroup]:
    """The group registered while the block runs (tests, plug-ins tried out)."""
    register(new)
    try:
        yield new
    finally:
        unregister(new.name)


def value_fields(g: SettingsGroup) -> tuple[str, ...]:
    """The names of a group's dataclass fields (the spec's attributes it holds)."""
    return tuple(f.name for f in fields(g.values))


def settings() -> list[Setting]:
    return [s for g in _GROUPS for s in g.settings]


def field_parsers() -> dict[str, Callable[[Any], Any]]:
    """Every setting's parser by its name (the flat values' keys: the budget as budget_unit and epochs)."""
    if "parsers" not in _cache:
        _cache["parsers"] = {s.name: s.parse for s in settings()}
    return dict(_cache["parsers"])


def defaults() -> dict[str, Any]:
    """Every setting's default (its group dataclass's), by setting name."""
    if "defaults" not in _cache:
        out: dict[str, Any] = {}
        for g in _GROUPS:
            out.update(g.flat(g.values()))
        _cache["defaults"] = out
    return dict(_cache["defaults"])


def checks() -> list[Check]:
    """The checks among parsed values, group by group (pure: none reads a file)."""
    return [c for g in _GROUPS for c in g.checks]


def hook_factories() -> list[HookFactory]:
    """Every group's training hook factories, by priority (lower first)."""
    return sorted((h for g in _GROUPS for h in g.hooks), key=lambda h: h.priority)


def form_description() -> list[tuple[str, str, list[FormField]]]:
    """(group name, title, fields) for the window's form, Qt-free: the GUI renders each field by its kind."""
    return [(g.name, g.title, g.form_fields()) for g in _GROUPS if g.form]


__all__ = [
    "FormField",
    "HookFactory",
    "Setting",
    "SettingsGroup",
    "checks",
    "defaults",
    "field_parsers",
    "form_description",
    "group",
    "groups",
    "hook_factories",
    "register",
    "registered",
    "settings",
    "unregister",
    "value_fields",
]
