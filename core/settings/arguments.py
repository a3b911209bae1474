"""The command line of the settings: one argparse argument group per settings group, and the spec values
the parsed arguments give (None: not given, the preset's). Every value is parsed by its group, never here."""

from __future__ import annotations

import argparse
from typing import Any

from batchlab.core import settings as registry
from batchlab.core.settings.base import Setting


def option_dest(option: str) -> str:
    return option[2:].replace("-", "_")


def add_setting(parser, setting: Setting, help_text: str | None = None) -> None:
    """The option of one setting: a flag for a bool (given: true), else a value."""
    text = setting.help if help_text is None else help_text
    if setting.kind == "bool":
        parser.add_argument(setting.option, dest=setting.name, action="store_true", default=None, help=text)
    else:
        parser.add_argument(setting.option, default=None, help=text)


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """Every setting's option, grouped as `--help` shows them."""
    for group in registry.groups():
        section = parser.add_argument_group(group.title)
        for setting in group.settings:
            if setting.option:
                add_setting(section, setting)
        if group.add_arguments:
            group.add_arguments(section)


def sweep_values(args: argparse.Namespace) -> dict[str, Any]:
    """The spec values the parsed options give (None: not given, the preset's); the window builds the same."""
    values: dict[str, Any] = {}
    for group in registry.groups():
        for setting in group.settings:
            if setting.option:
                dest = setting.name if setting.kind == "bool" else option_dest(setting.option)
                values[setting.name] = getattr(args, dest, None)
        if group.read_arguments:
            values.update(group.read_arguments(args))
    return values


def value_options() -> tuple[tuple[str, str, str], ...]:
    """(option, setting, help) of every setting given as a value (not a flag)."""
    return tuple((s.option, s.name, s.help) for s in registry.settings() if s.option and s.kind != "bool")
