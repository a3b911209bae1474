"""bench/gpu_figures.py's multi-GPU part, checked on a CPU: its plan (every command a valid sweep), its skip
with fewer than 2 GPUs, and its markdown table against hand-computed ratios."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from batchlab.core.analysis.scaling import ScalingPoint
from batchlab.core.cli import _build_parser, sweep_values
from batchlab.core.spec import build_spec

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu_figures.py"


@pytest.fixture(scope="module")
def figures():
    spec = importlib.util.spec_from_file_location("gpu_figures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_replicas_go_in_powers_of_two_up_to_the_gpus(figures):
    assert [figures.replica_counts(n) for n in (1, 2, 3, 4, 8)] == [[1], [1, 2], [1, 2, 3], [1, 2, 4], [1, 2, 4, 8]]


def test_the_plan_is_the_same_sweep_alone_and_on_every_gpu_then_replicas_at_a_fixed_per_replica_batch(figures):
    args = figures.parse_args(["--multi-gpu", "--dry-run", "--gpus", "4"])
    plan = figures.multi_gpu_plan(args, 4)
    assert [stage for stage, _ in plan] == ["one at a time", "parallel gpus", "replicas 1", "replicas 2", "replicas 4"]
    specs = {}
    for stage, options in plan:
        parsed = _build_parser().parse_args(options)  # what `batchlab` would parse, checked as it would be
        specs[stage] = build_spec(sweep_values(parsed))
        assert specs[stage].device == "auto" and options[-1].endswith(".h5")
    alone, paired = specs["one at a time"], specs["parallel gpus"]
    assert (alone.parallel, paired.parallel) == ("", "gpus")
    assert alone.to_dict() | {"parallel": "gpus"} == paired.to_dict()  # the same sweep otherwise
    assert len(alone.runs()) == 8
    for n in (1, 2, 4):
        spec = specs[f"replicas {n}"]
        assert spec.replicas == n
        assert [b // n for b in spec.batch_sizes] == list(figures.PER_REPLICA_BATCHES)


def test_dry_run_prints_the_plan_and_fewer_than_two_gpus_skip_in_one_line():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1"}
    run = [sys.executable, str(SCRIPT), "--multi-gpu", "--dry-run", "--gpus"]
    one = subprocess.run([*run, "1"], capture_output=True, text=True, env=env, timeout=120)
    assert one.returncode == 0 and one.stdout.strip().splitlines() == [
        "multi-GPU part skipped: 1 GPU found here, it needs 2 or more"
    ]
    two = subprocess.run([*run, "2"], capture_output=True, text=True, env=env, timeout=120)
    lines = two.stdout.strip().splitlines()
    assert two.returncode == 0 and lines[0].startswith("multi-GPU part on 2 GPUs, 4 sweeps")
    assert lines[2].startswith("parallel gpus: batchlab sweep ") and "--parallel gpus" in lines[2]
    assert lines[4].endswith("--replicas 2 --batch-sizes 128,512 --out r2.h5")


def test_the_table_gives_the_wall_ratio_and_weak_scaling_efficiency(figures):
    walls = {"one at a time": 100.0, "parallel gpus": 40.0}
    summaries = {
        "one at a time": {"runs": 4, "ok": 4, "per_gpu": {"gpu:0": 4}, "samples_per_s": {(64, 0): 1000.0}},
        "parallel gpus": {"runs": 4, "ok": 4, "per_gpu": {"0": 2, "1": 2}, "samples_per_s": {(64, 0): 900.0}},
    }
    points = [  # per-replica batch 256: one replica 1000 samples/s at 0.256 s a step
        ScalingPoint(1, 256, 1000.0, 0.256, float("nan"), 1),
        ScalingPoint(2, 512, 1800.0, 0.2844, float("nan"), 1),
        ScalingPoint(4, 1024, 3200.0, 0.32, float("nan"), 1),
    ]
    text = "\n".join(figures.multi_gpu_tables(2, walls, summaries, points))
    assert "| one at a time | 100.0 | 4/4 | gpu:0: 4 |" in text
    assert "| parallel gpus | 40.0 | 4/4 | 0: 2, 1: 2 |" in text
    assert "**2.50x** on 2 GPUs" in text and "median over runs: 0.90" in text
    assert "| 256 | 1 | 256 | 1,000 | 1.00x | 100% | - |" in text
    assert "| 256 | 2 | 512 | 1,800 | 1.80x | 90% | 28.40 ms |" in text  # 1800 / (2 x 1000); 0.2844 - 0.256 s
    assert "| 256 | 4 | 1024 | 3,200 | 3.20x | 80% | 64.00 ms |" in text
