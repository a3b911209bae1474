"""What measuring the gradient noise scale costs: a measured step against an ordinary one.

Runs a real sweep (batchlab.core.sweep.runner.run_sweep, one training child per batch size) with
--noise-scale-every N and prints, per batch size, the median time of a measured step (the k
micro-batch passes plus the ordinary update) over the run's steady step time, the training time
measuring every N steps adds (the passes are off the run's clock, so this is what it would add),
and the final B_simple. The figures come from core.analysis.noise_scale.noise_scale_report, the
same lines `batchlab report` prints. Target: about 2x an ordinary step (k micro-batches of B/k
cost about one more pass over the batch), +5% or less at every 20 steps. Not a test: timings are
noisy on a shared machine.

Usage (from the repository root):

    .venv/bin/python bench/bench_noise_scale_cost.py [--preset mnist-cnn] [--batch-sizes 64,256]
        [--steps 200] [--every 20] [--parts 4] [--samples 8192] [--device cpu|gpu:0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from batchlab.core.analysis.noise_scale import noise_scale_report
from batchlab.core.model import SweepData
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import run_sweep


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="mnist-cnn")
    parser.add_argument("--batch-sizes", default="64,256")
    parser.add_argument("--steps", default="200")
    parser.add_argument("--every", default="20")
    parser.add_argument("--parts", default="4")
    parser.add_argument("--samples", default="8192")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    spec = build_spec(
        {"preset": args.preset, "batch_sizes": args.batch_sizes, "samples": args.samples, "val_samples": 0}
        | {"budget_unit": "steps", "epochs": args.steps, "device": args.device}
        | {"noise_scale_every": args.every, "noise_scale_parts": args.parts}
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "noise-cost.h5"
        status = run_sweep(spec, path)
        sweep = SweepData.from_file(path)
    print(f"{args.preset}, {args.steps} steps, every {args.every} steps, {args.parts} parts, {args.device}: {status}")
    print("\n".join(noise_scale_report(sweep)) or "no measurements")
    return 0


if __name__ == "__main__":
    sys.exit(main())
