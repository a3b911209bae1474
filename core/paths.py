"""Where a sweep's run file goes: its default name and what makes a path unusable, for the CLI and the window.

One set of rules: the CLI's --out, the window's run-file field and the run-file writer all ask here,
so they accept the same paths and refuse the rest with the same message.
"""

from __future__ import annotations

import os
import re
import sys
from datetime import datetime
from pathlib import Path

from batchlab.core.errors import SpecError

DEFAULT_OUT_DIR = "runs"  # relative to the working directory, created on first use
RUN_FILE_SUFFIXES = (".h5", ".hdf5")
DEFAULT_NAME = re.compile(r"-\d{8}-\d{6}\.h5$")  # PRESET-YYYYmmdd-HHMMSS.h5


def user_path(text: str | os.PathLike) -> Path:
    """A path as typed, with ~ expanded (a shell does that on a command line; a form field does not)."""
    return Path(str(text).strip()).expanduser()


def default_run_file(preset: str, folder: str | os.PathLike = DEFAULT_OUT_DIR) -> Path:
    """A fresh time-stamped name, e.g. runs/mnist-mlp-20260101-120000.h5 (the folder is not created)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return user_path(folder) / f"{preset}-{stamp}.h5"


def is_default_run_file(path: str | os.PathLike) -> bool:
    """True for a name `default_run_file` made (the window replaces it when the preset changes)."""
    return bool(DEFAULT_NAME.search(str(path)))


def run_file_problem(
    path: str | os.PathLike, *, overwrite: bool = False, create_folder: bool = False
) -> SpecError | None:
    """What is wrong with writing a run file at `path`, as a SpecError on field "out"; None when it is fine.

    `overwrite` allows an existing file; `create_folder` allows one missing folder level (it is
    created when the sweep starts, like the default runs/ folder).
    """
    if not str(path).strip():
        return SpecError("out", "choose a run file to save the sweep to, e.g. sweep.h5")
    p = user_path(path)
    if p.suffix.lower() not in RUN_FILE_SUFFIXES:
        return SpecError("out", f"{p} does not end in .h5 or .hdf5; name the run file e.g. sweep.h5")
    if p.exists() and not overwrite:
        return SpecError("out", f"{p} already exists; choose another file or pass --overwrite")
    if p.is_dir():
        return SpecError("out", f"{p} is a folder; name a run file inside it, e.g. {p / 'sweep.h5'}")
    if not p.parent.is_dir() and not (create_folder and p.parent.parent.is_dir()):
        return SpecError("out", f"cannot create {p}: folder {p.parent} does not exist")
    return None


def check_run_file(path: str | os.PathLike, *, overwrite: bool = False, create_folder: bool = False) -> Path:
    """The run file path with ~ expanded, its folder created if allowed; raises SpecError("out") if unusable."""
    problem = run_file_problem(path, overwrite=overwrite, create_folder=create_folder)
    if problem is not None:
        raise problem
    p = user_path(path)
    if create_folder:
        try:
            p.parent.mkdir(exist_ok=True)
        except OSError as e:
            raise SpecError("out", f"cannot create folder {p.parent}: {e.strerror or e}") from None
    return p


CACHE_ENV = "BATCHLAB_CACHE_DIR"  # overrides the user cache folder (tests, shared machines)


def user_cache_dir() -> Path:
    """BatchLab's folder in the user's cache directory: $XDG_CACHE_HOME/batchlab or ~/.cache/batchlab on Linux,
    ~/Library/Caches/batchlab on macOS, %LOCALAPPDATA%\\batchlab\\Cache on Windows; BATCHLAB_CACHE_DIR overrides it."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "batchlab"
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local")) / "batchlab" / "Cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "batchlab"
