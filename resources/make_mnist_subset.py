"""Regenerate resources/mnist_subset.npz: the first 10,000 train and 2,000 test MNIST images.

BatchLab ships this subset so the default presets run offline. The full MNIST it is cut from
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
SOURCE_SHA256 = "06af5dfe73b70e3bc1c36439982b18a8d76803db9b544f6fdf838a37fbb01b64"
TRAIN_ROWS = 10_000
TEST_ROWS = 2_000
MAX_BYTES = 3 * 1024 * 1024
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
    for key, array in subset.items():
        if array.dtype != np.uint8:
            raise SystemExit(f"source: {key} is {array.dtype}, expected uint8")
    return subset


def label_counts(labels: np.ndarray) -> list[int]:
    """Samples per class 0-9."""
    return np.bincount(labels.astype(np.int64), minlength=10).tolist()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="full MNIST npz (Keras layout)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where to write the subset npz")
    args = parser.parse_args(argv)

    if not args.source.is_file():
        print(f"source: {args.source} does not exist; pass --source PATH to a Keras-layout mnist.npz", file=sys.stderr)
        return 2
    digest = sha256_of(args.source)
    if digest != SOURCE_SHA256:
        print(f"warning: {args.source} has sha256 {digest}, expected {SOURCE_SHA256}", file=sys.stderr)

    subset = make_subset(args.source)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.output, **subset)

    size = args.output.stat().st_size
    for key, array in subset.items():
        print(f"{key}: shape {array.shape}, dtype {array.dtype}")
    print(f"train label counts 0-9: {label_counts(subset['y_train'])}")
    print(f"test label counts 0-9: {label_counts(subset['y_test'])}")
    print(f"wrote {args.output} ({size} bytes)")
    if size > MAX_BYTES:
        print(f"error: {args.output} is {size} bytes, more than the {MAX_BYTES} bytes allowed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
