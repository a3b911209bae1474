"""What a settings group is made of, and the value parsers every group shares.

A group (one module of core/settings/) owns a frozen dataclass of its values, one `Setting` per value
(its parser, its command-line option and its form field), the checks among its values and, where it
changes training, a factory of its training hooks. Nothing here reads a file, imports TensorFlow or Qt.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from batchlab.core.errors import SpecError

KINDS = ("int", "float", "choice", "bool", "text")

# values: every parsed value of the sweep by field; errors: SpecError by field (a check adds to it)
Check = Callable[[dict[str, Any], dict[str, SpecError]], None]


@dataclass(frozen=True)
class FormField:
    """A setting as the window shows it, without Qt: the GUI renders one editor per kind."""

    name: str  # the spec field
    label: str  # the form's label; for a check box (kind bool), the box's text
    kind: str  # one of KINDS
    choices: tuple[tuple[str, str], ...] = ()  # (value, text) for kind "choice"
    tooltip: str = ""
    placeholder: str = ""
    group: str = ""  # the group's name


@dataclass(frozen=True)
class Setting:
    """One value a user can set: its parser (the one check of its text), option and form field."""

    name: str
    kind: str
    parse: Callable[[Any], Any]
    help: str  # the command line's help and the form's tooltip
    label: str = ""
    option: str | None = None  # e.g. "--abort-losers"; None: not an option of its own
    choices: tuple[tuple[str, str], ...] = ()
    placeholder: str = ""
    check_text: str = ""  # a check box's text in the window

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"setting {self.name}: kind {self.kind!r} is not one of {', '.join(KINDS)}")

    def form_field(self, group: str) -> FormField:
        label = self.label if self.kind != "bool" else ""
        shown = label or (self.check_text if self.kind == "bool" else self.name)
        return FormField(self.name, shown, self.kind, self.choices, self.help, self.placeholder, group)


@dataclass(frozen=True)
class HookFactory:
    """Builds a group's training hook for a run (or None when the run does not need it).

    `priority` orders the run's hooks (lower first, core/training/hooks.py PRIORITY): a hook says where it
    goes by number, never by a list position."""

    name: str
    # (run setup, emit, the hooks built before it by name) -> Hook | None; or "module:function" naming it, so
    # that a group need not import the training side (TensorFlow) to say which hook it adds
    build: Callable[[Any, Callable[[dict], None], dict[str, Any]], Any] | str
    priority: int

    def factory(self) -> Callable[[Any, Callable[[dict], None], dict[str, Any]], Any]:
        if callable(self.build):
            return self.build
        module, _, function = self.build.partition(":")
        return getattr(importlib.import_module(module), function)


@dataclass(frozen=True)
class SettingsGroup:
    """One group of settings: its values (a frozen dataclass), settings, checks and hooks."""

    name: str  # e.g. "budget"
    title: str  # the --help section and the form section, e.g. "Budget and target"
    values: type  # the frozen dataclass; its fields are the settings' names (defaults: the default preset's)
    settings: tuple[Setting, ...]
    checks: tuple[Check, ...] = ()  # pure: they read values, never files
    hooks: tuple[HookFactory, ...] = ()
    add_arguments: Callable[[Any], None] | None = None  # options beyond one per setting (argparse group)
    read_arguments: Callable[[Any], dict[str, Any]] | None = None  # their values from the parsed arguments
    from_flat: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None  # flat values -> dataclass fields
    to_flat: Callable[[Any], dict[str, Any]] | None = None  # the dataclass -> flat values by setting name
    form: bool = True  # whether its fields appear in the window's form description

    @property
    def parsers(self) -> dict[str, Callable[[Any], Any]]:
        return {s.name: s.parse for s in self.settings}

    def build(self, flat: Mapping[str, Any]) -> Any:
        """The group's dataclass from parsed flat values (those absent keep the dataclass defaults)."""
        fields = (
            self.from_flat(flat) if self.from_flat else {s.name: flat[s.name] for s in self.settings if s.name in flat}
        )
        return self.values(**fields)

    def flat(self, values: Any) -> dict[str, Any]:
        """The group's values by setting name (the parsers' names)."""
        if self.to_flat:
            return self.to_flat(values)
        return {s.name: getattr(values, s.name) for s in self.settings}

    def form_fields(self) -> list[FormField]:
        return [s.form_field(self.name) for s in self.settings if s.label or s.check_text]


# ---------------------------------------------------------------- shared parsers


def blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def whole(field_name: str, value: Any, minimum: int, what: str, maximum: int | None = None) -> int:
    """An integer from text or a number, within [minimum, maximum]; SpecError(field_name, ... what) if not."""
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


def whole_list(field_name: str, value: Any, minimum: int, what: str) -> tuple[int, ...]:
    """Integers separated by commas, semicolons or spaces (or a list), each listed once."""
    if isinstance(value, str):
        items = [v for v in value.replace(";", ",").replace(" ", ",").split(",") if v.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    if not items:
        raise SpecError(field_name, f"no values given; {what}")
    parsed = [whole(field_name, v, minimum, what) for v in items]
    if len(set(parsed)) != len(parsed):
        dupes = sorted({v for v in parsed if parsed.count(v) > 1})
        raise SpecError(field_name, f"{dupes[0]} is listed twice; list each value once")
    return tuple(parsed)


def number(field_name: str, value: Any, what: str) -> float:
    try:
        parsed = float(value)
    except (TypeError, ValueError):
        raise SpecError(field_name, f"{value!r} is not a number; {what}") from None
    if not math.isfinite(parsed):
        raise SpecError(field_name, f"{value!r} is not allowed; {what}")
    return parsed


def boolean(field_name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise SpecError(field_name, f"{value!r} is not allowed; use true or false")


def choice(field_name: str, value: Any, allowed: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in allowed:
        raise SpecError(field_name, f"{str(value)!r} is not known; choose one of {', '.join(allowed)}")
    return text


def user_path(text: str) -> str:
    """A path as the user typed it, with ~ expanded (a shell would have done it on a command line)."""
    return os.path.expanduser(text)


def fail(errors: dict[str, SpecError], name: str, message: str) -> None:
    """File `message` under `name` unless that field already has an error."""
    if name not in errors:
        errors[name] = SpecError(name, message)
