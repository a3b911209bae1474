"""Setup fields drawn from the settings groups' Qt-free description (core.settings.form_description): a
setting that no section of the panel builds by hand gets a row of its kind (line, check box, combo box) in
its group's section, or in a box of its own group, with its tooltip, error line and value. Mixed into
SetupPanel like ConvergenceFields, which provides `_row`, `_group`, `_editors` and `_applies`."""

from __future__ import annotations

from typing import Any

from batchlab.core.settings import FormField, form_description
from batchlab.gui.convergence_fields import SHOWN_UNDER
from batchlab.gui.field_rows import editor_for, editor_value
from PySide6.QtWidgets import QFormLayout, QVBoxLayout, QWidget


def described(name: str) -> FormField:
    """The description of the setting `name` (its label, kind, choices, tooltip and placeholder)."""
    for _group, _title, fields in form_description():
        for field in fields:
            if field.name == name:
                return field
    raise KeyError(name)


class GroupFields:
    """Builds and reads the fields drawn from their description; see the module docstring."""

    def _described_row(self, form: QFormLayout, name: str, *extra: QWidget) -> QWidget:
        """The row of setting `name` as its group describes it (label, editor, placeholder, tooltip), with
        `extra` widgets beside the editor; the editor is also the panel's attribute `name`."""
        field = described(name)
        editor = editor_for(field)
        setattr(self, name, editor)
        self._row(form, name, "" if field.kind == "bool" else field.label, editor, *extra)
        self._field_help[name] = field.tooltip
        return editor

    def _generic_rows(self, form: QFormLayout, group: str) -> None:
        """A row for every field of this settings group that no section built itself, drawn from its
        description (a setting added to a group shows up here without a line of GUI code)."""
        for name, _title, fields in form_description():
            if name != group:
                continue
            for field in fields:
                if field.name in self._editors or field.name in SHOWN_UNDER:
                    continue
                self._row(form, field.name, "" if field.kind == "bool" else field.label, editor_for(field))
                self._generic.append(field.name)
                self._field_help[field.name] = field.tooltip

    def _build_other_settings(self, layout: QVBoxLayout) -> None:
        """A box per settings group that has fields no section shows (e.g. a group added later)."""
        for name, title, fields in form_description():
            if any(f.name not in self._editors and f.name not in SHOWN_UNDER for f in fields):
                self._generic_rows(self._group(layout, title), name)

    def _generic_values(self) -> dict[str, Any]:
        """The fields drawn from their description; one that does not apply sends None (the preset's value)."""
        out = {}
        for field in self._generic:
            value = editor_value(self._editors[field])
            applies = self._applies(field)
            out[field] = (value and applies) if isinstance(value, bool) else (value if applies else None)
        return out
