"""A sweep on a local Ray instance against the same sweep one run at a time (issue 27's Ray target).

    .venv/bin/python bench/bench_ray.py                    # 8 mnist-mlp runs, 1 thread each, 2 rounds
    .venv/bin/python bench/bench_ray.py --rounds 1 --epochs 1

Each round runs the same 8-run mnist-mlp sweep twice, interleaved (the order alternates between rounds):
one run at a time on this machine (the default local launcher: a fork server, one child per run) and with
`--ray local` (a Ray instance started for the sweep, one run per CPU slot: as many runs at once as this
machine has cores), both with the same TensorFlow threads per run (--threads, default 1). It prints each
sweep's wall time from the call to the file closed (Ray's start and shutdown, the probe and every run
included), the ratio Ray / one at a time (the target: at most 0.60 on a 2-core machine), and Ray's own
overhead per run: from the task's submission to its worker's first message reaching the parent (submit to
first event), and to its run_started (which adds the TensorFlow import of a fresh worker and the model build).
/proc/loadavg is printed with every figure: on a shared machine other work takes cores from both sweeps.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from batchlab.core.events import RUN_STARTED, SWEEP_STARTED  # noqa: E402
from batchlab.core.spec import build_spec  # noqa: E402
from batchlab.core.sweep import ray_cluster  # noqa: E402
from batchlab.core.sweep.runner import SweepRunner, run_sweep  # noqa: E402

TARGET_RATIO = 0.60
_connect = ray_cluster.connect
CONNECT_S: list[float] = []  # how long each sweep's Ray start took (ray.init of a local instance)


def _timed_connect(address: str):
    t0 = time.monotonic()
    try:
        return _connect(address)
    finally:
        CONNECT_S.append(time.monotonic() - t0)


ray_cluster.connect = _timed_connect


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def sweep(values: dict, ray: bool, folder: Path, name: str) -> dict:
    """One sweep; its wall time (s), when sweep_started came (s), and per run (Ray) the overheads (s)."""
    spec = build_spec({**values, "ray": "local" if ray else ""})
    runner = SweepRunner(spec)
    seen: dict = {"run_started": {}}
    t0 = time.monotonic()

    def sink(event):
        if event["type"] == SWEEP_STARTED:
            seen["sweep_started"] = time.monotonic() - t0
        elif event["type"] == RUN_STARTED:
            seen["run_started"][event["run"]] = time.monotonic()

    load = loadavg()
    status = run_sweep(spec, folder / f"{name}.h5", sink=sink, runner=runner)
    wall = time.monotonic() - t0
    out = {"wall": wall, "status": status, "preflight": seen.get("sweep_started", float("nan")), "load": load}
    if ray:
        handles = runner.launcher.submitted
        out["first_event"] = [h.heard_at - h.submitted_at for h in handles]
        out["to_run_started"] = [seen["run_started"][h.run.index] - h.submitted_at for h in handles]
        out["slots"] = runner.launcher.slots
        out["ray_start"] = CONNECT_S[-1]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-sizes", default="32,64,128,256")
    parser.add_argument("--seeds", default="0,1", help="with 4 batch sizes: 8 runs")
    parser.add_argument("--samples", type=int, default=None, help="default: the preset's (10000)")
    parser.add_argument("--epochs", type=int, default=None, help="default: the preset's (5)")
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow threads per run, in both sweeps")
    args = parser.parse_args(argv)
    values = {
        "preset": "mnist-mlp",
        "device": "cpu",
        "batch_sizes": args.batch_sizes,
        "seeds": args.seeds,
        "samples": args.samples,
        "epochs": args.epochs,
        "tf_threads": args.threads,
    }
    spec = build_spec(values)
    runs, budget = len(spec.runs()), f"{spec.budget.amount} {spec.budget.unit}"
    print(
        f"{runs} mnist-mlp runs ({spec.samples} samples, {budget}, {args.threads} thread(s) each), "
        f"{os.cpu_count()} cores; loadavg at start {loadavg()}",
        flush=True,
    )
    folder = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    ratios, first_events, to_started = [], [], []
    for round_ in range(args.rounds):
        order = (False, True) if round_ % 2 == 0 else (True, False)
        result = {}
        for ray in order:
            result[ray] = sweep(values, ray, folder, f"r{round_}-{'ray' if ray else 'seq'}")
            r = result[ray]
            print(
                f"round {round_ + 1} {'ray local' if ray else 'one at a time'}: {r['wall']:.1f} s "
                f"({r['status']}; sweep_started after {r['preflight']:.1f} s"
                + (f", of which Ray's start {r['ray_start']:.1f} s" if ray else "")
                + f"; loadavg before {r['load']})",
                flush=True,
            )
        ratio = result[True]["wall"] / result[False]["wall"]
        ratios.append(ratio)
        first_events += result[True]["first_event"]
        to_started += result[True]["to_run_started"]
        print(f"round {round_ + 1}: Ray / one at a time = {ratio:.2f} ({result[True]['slots']} slots)", flush=True)
    print(f"ratios: {', '.join(f'{r:.2f}' for r in ratios)} (target <= {TARGET_RATIO:.2f}); loadavg {loadavg()}")
    print(
        f"Ray per run, submit to first event: median {statistics.median(first_events) * 1e3:.0f} ms, "
        f"max {max(first_events) * 1e3:.0f} ms over {len(first_events)} runs; submit to run_started: median "
        f"{statistics.median(to_started):.2f} s, max {max(to_started):.2f} s"
    )
    return 0 if max(ratios) <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
