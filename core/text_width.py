"""How wide the command line's prose may be: the terminal's width, at most 100 characters.

On an 80-column terminal the explanation's 100-character lines wrapped mid-word; in a pipe or a file
(no terminal) lines stay 100 wide. COLUMNS, when set, is the width (as `shutil` reads it).
"""

from __future__ import annotations

import shutil

MAX_WIDTH = 100  # characters: the widest prose line anywhere
MIN_WIDTH = 40  # characters: a narrower terminal still gets lines this wide


def text_width() -> int:
    """Characters per line of prose for this terminal (one column spare: a full line would wrap on some)."""
    columns = shutil.get_terminal_size(fallback=(MAX_WIDTH + 1, 24)).columns
    return max(MIN_WIDTH, min(MAX_WIDTH, columns - 1))


def terminal_columns() -> int | None:
    """The terminal's columns when output goes to one (or COLUMNS is set); None for a pipe or a file, where a
    table keeps its one-line headers."""
    import os
    import sys

    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None
