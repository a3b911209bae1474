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
    """`~/Documents/BatchLab runs` as Qt names the documents folder on this desktop (the home folder if it
    names none); created only when the first sweep starts."""
    documents = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    base = (
        documents or QStandardPaths.writableLocation(QStandardPaths.StandardLocation.HomeLocation) or str(Path.home())
    )
    return str(Path(base) / FOLDER_NAME)
