"""How a run's failure is named: status, one-line message and the full traceback for the log.

TensorFlow-free on purpose (errors are recognised by class name), so the parent's tests can check
the classification without loading TensorFlow.
"""

from __future__ import annotations

import traceback

MESSAGE_CHARS = 300
# Allocator exhaustion as TensorFlow, XLA, cuDNN and the Python runtime word it.
_OOM_CLASSES = frozenset(("ResourceExhaustedError", "MemoryError", "OutOfMemoryError"))
_OOM_TEXT = ("RESOURCE_EXHAUSTED", "OOM when allocating")


class StopRequested(Exception):
    """The parent asked this run to end; what was measured so far is kept."""


class Diverged(Exception):
    """The loss became NaN or infinite."""


def classify_failure(e: BaseException) -> str:
    """'oom' for any memory exhaustion (device or host, at any step incl. copying data), else 'error'."""
    if any(cls.__name__ in _OOM_CLASSES for cls in type(e).__mro__):
        return "oom"
    text = str(e)
    if any(marker in text for marker in _OOM_TEXT) or "out of memory" in text.lower():
        return "oom"
    return "error"


def first_line(e: BaseException) -> str:
    """The line of an error a user needs: the OOM line if there is one, else the first, else the type."""
    text = str(getattr(e, "message", "") or e).strip()
    for line in text.splitlines():
        if "OOM" in line or "out of memory" in line.lower():
            return line.strip()[:MESSAGE_CHARS]
    if not text:
        return "out of memory" if isinstance(e, MemoryError) else type(e).__name__
    return text.splitlines()[0][:MESSAGE_CHARS]


def traceback_text(e: BaseException) -> str:
    """The full traceback of `e`, as Python prints it, for the run's log."""
    return "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip()
