"""Reading a user's data file: an npz archive or an HDF5 file, its known arrays or only their shapes.

Files are read with `allow_pickle=False`, so a data file can never run code; anything wrong is one DataError
naming the file, what is wrong and what is allowed. core/datasets.py checks and shapes what is read.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import h5py
import numpy as np
from batchlab.core.errors import SpecError

ARRAY_KEYS = ("x_train", "y_train", "x_test", "y_test")
NUMERIC_KINDS = "iuf"  # signed/unsigned integers and floats; no bool, complex, strings or objects


class DataError(SpecError):
    """A data source the user chose cannot be used; a SpecError on field "data" (or "samples"/"val_samples")."""

    def __init__(self, message: str, *, field_name: str = "data"):
        super().__init__(field_name, message)


def _check_numeric(origin: str, key: str, dtype: np.dtype) -> None:
    if dtype.kind not in NUMERIC_KINDS:
        raise DataError(
            f"{origin}: {key} has dtype {dtype}, which is not numeric; store integers (e.g. uint8 pixels) or floats"
        )


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """The known arrays of an npz archive, read without unpickling anything."""
    origin = f"file '{path}'"
    with path.open("rb") as f:
        magic = f.read(4)
    if magic not in (b"PK\x03\x04", b"PK\x05\x06"):
        raise DataError(f"{origin} is not a valid .npz archive (a zip of .npy arrays as np.savez writes)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in ARRAY_KEYS if key in archive.files}
    except ValueError as e:
        if "pickle" in str(e).lower() or "object arrays" in str(e).lower():
            raise DataError(
                f"{origin} holds object arrays (pickled Python objects), which are not allowed "
                "for safety; save plain numeric arrays with np.savez"
            ) from None
        raise DataError(f"{origin} is not a valid .npz archive ({e}); save it again with np.savez") from None
    except (OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as e:
        raise DataError(f"{origin} is not a valid .npz archive (corrupt or truncated: {e})") from None


def _read_hdf5(path: Path) -> dict[str, np.ndarray]:
    """The known datasets at the root of an HDF5 file, checked to be numeric before they are read."""
    origin = f"file '{path}'"
    try:
        with h5py.File(path, "r") as f:
            arrays = {}
            for key in ARRAY_KEYS:
                if key not in f:
                    continue
                node = f[key]
                if not isinstance(node, h5py.Dataset):
                    raise DataError(f"{origin}: '{key}' is a group; store {key} as a dataset at the file's root")
                _check_numeric(origin, key, node.dtype)
                arrays[key] = node[()]
            return arrays
    except OSError as e:
        raise DataError(f"{origin} is not a valid HDF5 file (corrupt, truncated or another format: {e})") from None


def _npz_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Shapes of an npz archive's known arrays from their .npy headers, without reading the data."""
    origin = f"file '{path}'"
    out = {}
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            for key in ARRAY_KEYS:
                if f"{key}.npy" not in names:
                    continue
                with archive.open(f"{key}.npy") as f:
                    version = np.lib.format.read_magic(f)
                    fmt = np.lib.format
                    reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                    shape, _, _ = reader(f)
                out[key] = tuple(int(n) for n in shape)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise DataError(f"{origin} is not a valid .npz archive ({e}); save it again with np.savez") from None
    return out


def _hdf5_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    origin = f"file '{path}'"
    try:
        with h5py.File(path, "r") as f:
            return {k: tuple(f[k].shape) for k in ARRAY_KEYS if k in f and isinstance(f[k], h5py.Dataset)}
    except OSError as e:
        raise DataError(f"{origin} is not a valid HDF5 file (corrupt, truncated or another format: {e})") from None
