"""`batchlab bench`: a fixed, versioned suite of sweeps, one run file per workload in one folder.

Each workload is an ordinary sweep (the preset's model, optimizer and data at the suite's batch sizes and
budget), run by the sweep runner and written by the one writer, so every file opens in `batchlab report`
and the window like any sweep. Its root also records the suite (name, version, workload, repeats) and the
machine (core/bench/machine.py) and the matmul peak (core/sweep/peak.py); `batchlab compare` reads them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from batchlab.core.bench.machine import machine_attrs
from batchlab.core.errors import SpecError
from batchlab.core.paths import DEFAULT_OUT_DIR, check_run_file, user_path
from batchlab.core.settings.base import whole
from batchlab.core.spec import SweepSpec, build_spec
from batchlab.core.sweep.runner import SweepRunner

SUITE_NAME = "batchlab-bench"
QUICK_SUITE_NAME = "batchlab-bench-quick"  # a smoke test of the machinery (tests, a first look); not comparable
# What the suite measures: its workloads, their data, samples, budget and batch sizes. Changing any of it changes
# what the numbers mean, so it must change SUITE_VERSION: `batchlab compare` refuses files of different versions.
SUITE_VERSION = 1
MAX_REPEATS = 10


@dataclass(frozen=True)
class BenchWorkload:
    """One sweep of the suite: a bundled preset at the suite's batch sizes, samples and epochs."""

    name: str  # the workload, also the run file's name
    preset: str
    batch_sizes: tuple[int, ...]
    samples: int  # training samples (the first N of the bundled MNIST data)
    epochs: int  # budget; the steady figures skip the traced steps of the first epoch

    def values(self, repeats: int, threads: int, device: str) -> dict[str, Any]:
        """The spec values of this workload's sweep: validation off (not measured), one seed per repeat."""
        return {
            "preset": self.preset,
            "samples": self.samples,
            "val_samples": 0,
            "epochs": self.epochs,
            "batch_sizes": ",".join(map(str, self.batch_sizes)),
            "seeds": ",".join(str(s) for s in range(repeats)),
            "tf_threads": threads,
            "device": device,
        }


SUITE = (
    BenchWorkload("autoencoder", "mnist-autoencoder", (8, 16, 32, 64, 128, 256, 512), 4096, 2),
    BenchWorkload("cnn", "mnist-cnn", (16, 32, 64, 128, 256, 512, 1024), 4096, 2),
    BenchWorkload("mlp", "mnist-mlp", (16, 32, 64, 128, 256, 512, 1024), 4096, 2),
)
QUICK_SUITE = tuple(BenchWorkload(w.name, w.preset, (16, 64), 256, 2) for w in SUITE)
WORKLOAD_NAMES = tuple(w.name for w in SUITE)


@dataclass(frozen=True)
class BenchPlan:
    """What one `batchlab bench` runs: the suite's workloads (all, or those named), repeats and settings."""

    suite: str
    workloads: tuple[BenchWorkload, ...]
    repeats: int
    threads: int
    device: str
    folder: Path

    def specs(self) -> list[tuple[BenchWorkload, SweepSpec]]:
        return [(w, build_spec(w.values(self.repeats, self.threads, self.device))) for w in self.workloads]

    def out_path(self, workload: BenchWorkload) -> Path:
        return self.folder / f"{workload.name}.h5"


def plan_bench(
    out: str | None,
    quick: bool = False,
    workloads: str | None = None,
    repeats: int | str = 1,
    threads: int | str = 0,
    device: str = "auto",
    overwrite: bool = False,
) -> BenchPlan:
    """The plan, every option checked (SpecError names the bad one) and every spec built before anything runs."""
    suite = QUICK_SUITE if quick else SUITE
    chosen = suite
    if workloads:
        names = [n.strip() for n in workloads.split(",") if n.strip()]
        unknown = [n for n in names if n not in WORKLOAD_NAMES]
        if unknown or not names:
            raise SpecError("workloads", f"{workloads!r} is not allowed; use some of {', '.join(WORKLOAD_NAMES)}")
        chosen = tuple(w for w in suite if w.name in names)
    repeats = _whole("repeats", repeats, 1, MAX_REPEATS)
    folder = user_path(out) if out else user_path(DEFAULT_OUT_DIR) / f"bench-{datetime.now():%Y%m%d-%H%M%S}"
    if folder.exists() and not folder.is_dir():
        raise SpecError("out", f"{folder} is a file; --out names a folder for the suite's run files")
    threads = _whole("threads", threads, 0, 1024)
    plan = BenchPlan(QUICK_SUITE_NAME if quick else SUITE_NAME, chosen, repeats, threads, device, folder)
    plan.specs()  # every spec valid before the first sweep starts
    for workload in chosen:
        check_run_file(plan.out_path(workload), overwrite=overwrite, create_folder=True)
    return plan


def _whole(name: str, value: int | str, low: int, high: int) -> int:
    return whole(name, value, low, f"use a whole number from {low} to {high}", high)


def suite_attrs(plan: BenchPlan, workload: BenchWorkload, bench_id: str) -> dict[str, Any]:
    """The suite's root attributes of one workload's run file (docs/runfile-format.md, *Benchmark files*)."""
    return {
        "bench_suite": plan.suite,
        "bench_suite_version": SUITE_VERSION,
        "bench_workload": workload.name,
        "bench_workloads": ",".join(w.name for w in plan.workloads),
        "bench_repeats": plan.repeats,
        "bench_id": bench_id,
    }


def peak_attrs(peak: dict[str, Any] | None) -> dict[str, Any]:
    """The matmul peak as root attributes; NaN and empty strings when it was not measured."""
    peak = peak or {}
    return {
        "matmul_peak_flops_per_s": float(peak.get("flops_per_s", math.nan) or math.nan),
        "matmul_peak_device": str(peak.get("device_description", "")),
        "matmul_peak_measured": str(peak.get("measured", "")),
    }


class BenchRunner(SweepRunner):
    """A sweep runner whose sweep_started carries the suite's and the machine's root attributes."""

    def __init__(self, spec: SweepSpec, attrs: dict[str, Any], peak: Callable[[dict[str, Any]], dict | None]):
        super().__init__(spec)
        self._attrs = attrs
        self._peak = peak  # the environment -> the matmul peak (measured now, or the cached one)

    def sweep_fields(self) -> dict[str, Any]:
        environment = self.environment or {}
        attrs = {**self._attrs, **machine_attrs(environment), **peak_attrs(self._peak(environment))}
        return {"root_attrs": attrs}


def bench_id() -> str:
    """What ties the run files of one `batchlab bench` together: its start time and process."""
    return f"{datetime.now().astimezone().isoformat(timespec='seconds')} pid {os.getpid()}"
