"""The error types a user sees, at the bottom of core's layers: any module may raise them.

A `SpecError` names the field, the value and what is allowed in one line; the CLI prints it as
``batchlab: FIELD: MESSAGE`` and the window shows it beside the field.
"""

from __future__ import annotations


class SpecError(ValueError):
    """A value the user gave is not allowed; the message names field, value and what is allowed."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message
