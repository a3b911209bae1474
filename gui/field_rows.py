"""A form row whose editor has its error message underneath, hidden while the value is good.

The setup panel, the range-test settings and the Find largest batch dialog all show a bad value the
same way: one line under the field (the CLI's own message), never a dialog."""

from __future__ import annotations

from PySide6.QtWidgets import QFormLayout, QLabel, QLayout, QVBoxLayout, QWidget


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
