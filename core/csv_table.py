"""CSV tables as training data: a header row, numeric cells, one or more target columns.

The rule, as docs/your-own-model.md states it: the first row names the columns; every other row
is one sample; the target column(s) (`--target-column`) become y, all other columns x, in file order.
Rows keep their order: the last round(rows * val_fraction) rows are the validation split (x_test,
y_test), the rows before them the training split. A file sorted by something (date, label) should
be shuffled first. Every cell must be a number; the first one that is not is named with its line
and column. Numpy and the csv module only.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from batchlab.core.errors import SpecError

FIELD = "target_column"  # the spec field a wrong column name is filed under
MAX_QUOTED_CELL = 40  # characters of a bad cell quoted in a message


def _error(message: str, field_name: str = "data") -> SpecError:
    return SpecError(field_name, message)


def read_csv_arrays(path: Path, target_column: str, val_fraction: float) -> dict[str, np.ndarray]:
    """x_train, y_train (and x_test, y_test when val_fraction leaves validation rows) from a CSV file."""
    origin = f"file '{path}'"
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise _error(f"{origin} could not be read as a CSV table ({e})") from None
    rows = [r for r in rows if any(cell.strip() for cell in r)]  # blank lines (a trailing newline) do not count
    if len(rows) < 2:
        raise _error(f"{origin} needs a header row naming the columns and at least one row of numbers")
    header = [name.strip() for name in rows[0]]
    wanted = [t.strip() for t in target_column.split(",") if t.strip()]
    if not wanted:
        raise _error("CSV data needs the target column named, e.g. --target-column price", FIELD)
    missing = [t for t in wanted if t not in header]
    if missing:
        raise _error(
            f"{origin} has no column {missing[0]!r}; its columns are {', '.join(header)}",
            FIELD,
        )
    if len(wanted) == len(header):
        raise _error(f"{origin}: every column is a target; leave at least one column as input", FIELD)
    values = np.empty((len(rows) - 1, len(header)), dtype=np.float64)
    for i, row in enumerate(rows[1:]):
        line = i + 2  # the header is line 1
        if len(row) != len(header):
            raise _error(f"{origin}: line {line} has {len(row)} cells but the header names {len(header)} columns")
        for j, cell in enumerate(row):
            try:
                values[i, j] = float(cell)
            except ValueError:
                quoted = cell.strip()[:MAX_QUOTED_CELL]
                raise _error(
                    f"{origin}: line {line}, column {header[j]!r} holds {quoted!r}, which is not a number; "
                    "every cell of a CSV table must be numeric (encode categories as numbers)"
                ) from None
    target_index = [header.index(t) for t in wanted]
    input_index = [j for j in range(len(header)) if j not in target_index]
    x = values[:, input_index]
    y = values[:, target_index[0]] if len(target_index) == 1 else values[:, target_index]
    n_val = int(round(len(values) * val_fraction))
    n_train = len(values) - n_val
    if n_train < 1:
        raise _error(f"{origin} has {len(values)} rows, none left for training at val_fraction {val_fraction:g}")
    arrays = {"x_train": x[:n_train], "y_train": y[:n_train]}
    if n_val:
        arrays.update(x_test=x[n_train:], y_test=y[n_train:])
    return arrays
