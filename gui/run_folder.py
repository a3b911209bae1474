"""Where the window writes run files when the user has not chosen a folder yet.

A desktop program keeps its files in the user's documents, not in whatever folder it was started from
(from a clone, `./runs` was inside the repository). The last folder used is remembered in the settings
(`files/output_dir`) and wins over this default.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QStandardPaths

FOLDER_NAME = "BatchLab runs"


def default_output_dir() -> str:
    """`Documents/BatchLab runs` where Qt names a documents folder that exists on this desktop, else
    `~/BatchLab runs` (a server account often has no ~/Documents); the folder itself is created when the
    first sweep starts (one missing level, as for any run file)."""
    where = QStandardPaths.StandardLocation
    home = QStandardPaths.writableLocation(where.HomeLocation) or str(Path.home())
    documents = QStandardPaths.writableLocation(where.DocumentsLocation)
    base = documents if documents and Path(documents).is_dir() else home
    return str(Path(base) / FOLDER_NAME)
