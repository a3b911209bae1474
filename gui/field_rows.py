"""A form row whose editor has its error message underneath, hidden while the value is good.

The setup panel, the range-test settings and the Find largest batch dialog all show a bad value the
same way: one line under the field (the CLI's own message), never a dialog."""

from __future__ import annotations

from typing import Any

from batchlab.core.settings import FormField
from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QLabel, QLayout, QLineEdit, QVBoxLayout, QWidget


def error_line(name: str | None = None) -> QLabel:
    """The hidden, word-wrapped error label of a field (object name `error_<name>` when named)."""
    error = QLabel()
    if name:
        error.setObjectName(f"error_{name}")
    error.setProperty("role", "error")
    error.setWordWrap(True)
    error.setVisible(False)
    return error


def add_field_row(form: QFormLayout, label: str, editor: QWidget | QLayout, error: QLabel) -> QWidget:
    """Add `label`: `editor` with `error` under it to `form`; returns the row's holder widget."""
    holder = QWidget()
    column = QVBoxLayout(holder)
    column.setContentsMargins(0, 0, 0, 0)
    column.setSpacing(1)
    if isinstance(editor, QLayout):
        column.addLayout(editor)
    else:
        column.addWidget(editor)
    column.addWidget(error)
    form.addRow(label, holder)
    return holder


def editor_for(field: FormField) -> QWidget:
    """The editor of a setting from its Qt-free description (core.settings.FormField): a line for a number or
    text, a check box for a bool, a combo box of (value, text) choices."""
    if field.kind == "bool":
        editor: QWidget = QCheckBox(field.label)
    elif field.kind == "choice" and field.choices:
        editor = QComboBox()
        for value, text in field.choices:
            editor.addItem(text, value)
    else:
        editor = QLineEdit()
        editor.setPlaceholderText(field.placeholder)
    editor.setToolTip(field.tooltip)
    return editor


def editor_value(editor: QWidget) -> Any:
    """What an editor made by editor_for holds, as the spec's parsers take it."""
    if isinstance(editor, QCheckBox):
        return editor.isChecked()
    if isinstance(editor, QComboBox):
        return editor.currentData()
    return editor.text()
