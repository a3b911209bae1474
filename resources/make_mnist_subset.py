"""Regenerate resources/mnist_subset.npz (the first 10,000 train and 2,000 test MNIST images) and
resources/mnist_extra.npz (the next 20,000 train images, rows 10,000 to 29,999).

BatchLab ships these so the presets run offline: `--data bundled` is the first file,
`--data bundled-large` the two together (30,000 train images, the same 2,000 test images). The full MNIST it is cut from
lives outside the project (../shared/datasets/mnist.npz, Keras npz layout, uint8 pixels).
The rows are taken in their stored order, never shuffled, so the subset is reproducible.

Usage (from the repository root):

    python resources/make_mnist_subset.py [--source PATH] [--output PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO_ROOT.parent / "shared" / "datasets" / "mnist.npz"
DEFAULT_OUTPUT = REPO_ROOT / "resources" / "mnist_subset.npz"
DEFAULT_EXTRA_OUTPUT = REPO_ROOT / "resources" / "mnist_extra.npz"
SOURCE_SHA256 = "06af5dfe73b70e3bc1c36439982b18a8d76803db9b544f6fdf838a37fbb01b64"
TRAIN_ROWS = 10_000
TEST_ROWS = 2_000
EXTRA_TRAIN_ROWS = 20_000  # train rows TRAIN_ROWS .. TRAIN_ROWS + EXTRA_TRAIN_ROWS - 1, appended by bundled-large
MAX_BYTES = 3 * 1024 * 1024  # the subset
MAX_EXTRA_BYTES = 4 * 1024 * 1024  # the extra training rows
KEYS = ("x_train", "y_train", "x_test", "y_test")


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def make_subset(source: Path) -> dict[str, np.ndarray]:
    """The first TRAIN_ROWS training and TEST_ROWS test rows of a Keras-layout MNIST npz, as uint8."""
    with np.load(source, allow_pickle=False) as full:
        missing = [k for k in KEYS if k not in full.files]
        if missing:
            raise SystemExit(f"source: {source} lacks {', '.join(missing)}; expected keys {', '.join(KEYS)}")
        subset = {
            "x_train": full["x_train"][:TRAIN_ROWS],
            "y_train": full["y_train"][:TRAIN_ROWS],
            "x_test": full["x_test"][:TEST_ROWS],
            "y_test": full["y_test"][:TEST_ROWS],
        }
    return _checked_uint8(subset)


def make_extra(source: Path) -> dict[str, np.ndarray]:
    """The EXTRA_TRAIN_ROWS training rows after the subset's (x_train and y_train only), as uint8."""
    end = TRAIN_ROWS + EXTRA_TRAIN_ROWS
    with np.load(source, allow_pickle=False) as full:
        if len(full["x_train"]) < end:
            raise SystemExit(f"source: {source} has {len(full['x_train'])} training rows; the extra file needs {end}")
        extra = {"x_train": full["x_train"][TRAIN_ROWS:end], "y_train": full["y_train"][TRAIN_ROWS:end]}
    return _checked_uint8(extra)


def _checked_uint8(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    for key, array in arrays.items():
        if array.dtype != np.uint8:
            raise SystemExit(f"source: {key} is {array.dtype}, expected uint8")
    return arrays


def label_counts(labels: np.ndarray) -> list[int]:
    """Samples per class 0-9."""
    return np.bincount(labels.astype(np.int64), minlength=10).tolist()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="full MNIST npz (Keras layout)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where to write the subset npz")
    parser.add_argument(
        "--extra-output", type=Path, default=DEFAULT_EXTRA_OUTPUT, help="where to write the extra training rows"
    )
    args = parser.parse_args(argv)

    if not args.source.is_file():
        print(f"source: {args.source} does not exist; pass --source PATH to a Keras-layout mnist.npz", file=sys.stderr)
        return 2
    digest = sha256_of(args.source)
    if digest != SOURCE_SHA256:
        print(f"warning: {args.source} has sha256 {digest}, expected {SOURCE_SHA256}", file=sys.stderr)

    status = 0
    outputs = (
        (args.output, make_subset(args.source), MAX_BYTES),
        (args.extra_output, make_extra(args.source), MAX_EXTRA_BYTES),
    )
    for output, arrays, max_bytes in outputs:
        output.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(output, **arrays)
        size = output.stat().st_size
        for key, array in arrays.items():
            print(f"{key}: shape {array.shape}, dtype {array.dtype}")
        print(f"train label counts 0-9: {label_counts(arrays['y_train'])}")
        if "y_test" in arrays:
            print(f"test label counts 0-9: {label_counts(arrays['y_test'])}")
        print(f"wrote {output} ({size} bytes)")
        if size > max_bytes:
            print(f"error: {output} is {size} bytes, more than the {max_bytes} bytes allowed", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
