"""GPU figures in one command: the mnist-autoencoder sweep, its fused, XLA and mixed-precision variants, the
max-batch finder and TensorFlow's allocator peak beside NVML's process memory, as one markdown table.

    .venv/bin/python bench/gpu_figures.py                      # on an NVIDIA GPU (gpu:0), under 8 minutes
    .venv/bin/python bench/gpu_figures.py --device cpu --smoke # a short check of the script on a CPU
    .venv/bin/python bench/gpu_figures.py --multi-gpu          # the multi-GPU part, under 8 minutes
    .venv/bin/python bench/gpu_figures.py --multi-gpu --dry-run --gpus 4  # its plan, without running it

Every figure comes from BatchLab itself, run as a user runs it (`batchlab sweep`, `batchlab max-batch`, each
a fresh process per run), and is read back from the run files, so the table shows what the files hold:

- clocks: BatchLab's loop reads every step's loss (the fused loop: every call's losses) before it stops
  the step's clock; the copy to the host waits for the GPU, so a clock never times only the launch of
  asynchronous kernels. Whole sweeps are timed from process start to exit here.
- memory, per run and per device: TensorFlow's allocator peak of the one visible GPU
  (`tf.config.experimental.get_memory_info("GPU:0")`, reset every epoch) and this process's memory on
  that GPU as NVML (nvidia-smi) shows it, the NVML device found by the PCI bus id TensorFlow reports
  (core/training/memory.py), not by index: NVML numbers GPUs in PCI order, CUDA fastest first.
- mixed precision is GPU-only (refused on the CPU), so `--device cpu` leaves it out.

The stages run in order of importance and each is skipped, and marked so, once `--budget-s` has passed,
so the command ends in time even on a slower GPU. The table goes to stdout and to --out.

The multi-GPU part (`--multi-gpu`, its own command; docs/scaling.md) needs 2 or more GPUs (with fewer it
says so in one line and skips): the same sweep of several runs one at a time and with `--parallel gpus`
(one run per GPU, each process seeing only its GPU), their wall times and ratio; then data-parallel runs
(`--replicas`, MirroredStrategy) at 1, 2, 4, ... replicas up to the GPUs found, at a fixed per-replica
batch (weak scaling), read back through core/analysis/scaling.py: throughput, speedup, efficiency =
throughput(n) / (n x throughput(1)) and the extra time a step takes. `--dry-run` prints every command a
part would run instead of running it.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

PRESET = "mnist-autoencoder"
MIB = 1 << 20
DEFAULT_BUDGET_S = 420  # stop starting stages after this; the one running then ends well before 8 minutes
DEFAULT_FUSED = 64
MAX_BATCH_START = 512  # the search grows from here: fewer tries (a process each) than from the default 8
SMOKE = {"batch_sizes": "64,256", "epochs": 2, "samples": 512}  # --smoke: a short check of the script
# The multi-GPU part: 8 runs for the GPUs to share, then replicas at these per-replica batches (weak scaling),
# with enough samples that the largest global batch (per-replica batch x the GPUs) still takes steady steps.
PARALLEL_SWEEP = {"batch_sizes": "64,128,256,512", "seeds": "0,1", "epochs": 5}
PER_REPLICA_BATCHES = (64, 256)
SCALING_SWEEP = {"samples": 20000, "epochs": 2}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="gpu:0", help="gpu:N (default gpu:0) or cpu")
    p.add_argument("--batch-sizes", default=None, help="default: the preset's, 8 to 512")
    p.add_argument("--epochs", type=int, default=None, help="default: the preset's (10)")
    p.add_argument("--samples", type=int, default=None, help="default: the preset's (5000)")
    p.add_argument("--fused", type=int, default=DEFAULT_FUSED, help=f"steps per call (default {DEFAULT_FUSED})")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, help="start no stage after this many s")
    p.add_argument("--smoke", action="store_true", help="tiny sizes: batch 64,256, 2 epochs, 512 samples")
    p.add_argument("--out", default=None, help="markdown file to write (default runs/gpu-figures-DATE.md)")
    p.add_argument("--multi-gpu", action="store_true", help="the multi-GPU part: runs at once, and replicas")
    p.add_argument("--gpus", type=int, default=None, help="GPUs to plan for (default: as `batchlab info` lists)")
    p.add_argument("--dry-run", action="store_true", help="print the commands a part would run, run nothing")
    args = p.parse_args(argv)
    if args.smoke:
        for key, value in SMOKE.items():
            if getattr(args, key) is None:
                setattr(args, key, value)
    return args


def _env(device: str) -> dict[str, str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = "-1"
    return env


def batchlab(args: argparse.Namespace, *options: str) -> tuple[float, subprocess.CompletedProcess]:
    """Run `batchlab OPTIONS` as a user does; (wall seconds, result)."""
    cmd = [sys.executable, str(REPO_ROOT / "main.py"), *options]
    t0 = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True, env=_env(args.device))
    return time.perf_counter() - t0, result


def sweep_options(args: argparse.Namespace, out: Path, *extra: str) -> list[str]:
    options = ["sweep", "--preset", PRESET, "--device", args.device, "--out", str(out), "--overwrite", "--quiet"]
    for flag, value in (("--batch-sizes", args.batch_sizes), ("--epochs", args.epochs), ("--samples", args.samples)):
        if value is not None:
            options += [flag, str(value)]
    return [*options, *extra]


def read_sweep(path: Path) -> dict[int, dict]:
    """Per batch size: steady samples/s, tracing s, final loss, run status and the memory figures (MiB)."""
    import numpy as np
    from batchlab.core.runfile.reader import read_run_file

    out = {}
    for run in read_run_file(path).runs:
        f = run.figures
        tf_peak = run.epochs.get("tf_peak_bytes", np.array([-1]))
        nvml = run.epochs.get("device_memory_bytes", np.array([-1]))
        rss = run.epochs.get("rss_peak_bytes", np.array([-1]))
        out[run.batch_size] = {
            "status": run.status,
            "samples_per_s": f.samples_per_s,
            "tracing_s": f.tracing_time,
            "final_loss": f.final_loss,
            "tf_peak_mib": _mib(tf_peak),
            "nvml_mib": _mib(nvml),
            "rss_mib": _mib(rss),
            "xla": int(run.attrs.get("xla", 0)),
            "precision": str(run.attrs.get("precision", "float32")),
        }
    return out


def _mib(values) -> float:
    known = [float(v) for v in values if v is not None and v >= 0]
    return max(known) / MIB if known else math.nan


def _num(value: float, digits: int = 0) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:,.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.multi_gpu:
        return multi_gpu_main(args)
    if args.dry_run:
        for name, extra in single_gpu_variants(args):
            out = Path(name.replace(" ", "-") + ".h5")
            print(f"{name}: {_shell(sweep_options(args, out, *extra))}")
        return 0
    started = time.perf_counter()
    stamp = datetime.now().astimezone()
    out_md = Path(args.out) if args.out else REPO_ROOT / "runs" / f"gpu-figures-{stamp:%Y%m%d-%H%M%S}.md"
    variants = single_gpu_variants(args)
    lines = [
        f"# GPU figures, {stamp.isoformat(timespec='seconds')}",
        "",
        f"Command: `{' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}`  ",
        f"Machine: {platform.node()}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}; "
        f"device {args.device}  ",
    ]
    info_wall, info = batchlab(args, "info")
    lines += [f"`batchlab info`: {' / '.join(line.strip() for line in info.stdout.splitlines()[:6])}", ""]
    sweeps: dict[str, dict[int, dict]] = {}
    walls: dict[str, float] = {}
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in variants:
            if time.perf_counter() - started > args.budget_s:
                notes.append(f"{name}: skipped (time budget of {args.budget_s:.0f} s spent)")
                continue
            path = Path(tmp) / f"{name.replace(' ', '-')}.h5"
            wall, result = batchlab(args, *sweep_options(args, path, *extra))
            if result.returncode != 0 or not path.exists():
                notes.append(f"{name}: failed (exit {result.returncode}): {_last_line(result)}")
                continue
            walls[name], sweeps[name] = wall, read_sweep(path)
            print(f"{name}: {wall:.1f} s", flush=True)
        if time.perf_counter() - started > args.budget_s:
            notes.append(f"max-batch: skipped (time budget of {args.budget_s:.0f} s spent)")
            max_batch = None
        else:
            options = ["max-batch", "--preset", PRESET, "--device", args.device]
            if args.samples is not None:
                options += ["--samples", str(args.samples)]
            options += ["--start", str(min(MAX_BATCH_START, args.samples or MAX_BATCH_START))]
            wall, result = batchlab(args, *options)
            max_batch = (wall, result)
    lines += _sweep_tables(sweeps, walls)
    if max_batch is not None:
        wall, result = max_batch
        answer = [line for line in result.stdout.splitlines() if line.startswith(("max batch", "largest", "even"))]
        lines += ["## Largest batch (`batchlab max-batch`)", "", f"{wall:.0f} s, exit {result.returncode}:", ""]
        lines += [f"    {line}" for line in (answer or [_last_line(result)])] + [""]
    lines += [f"- {note}" for note in notes]
    lines += ["", f"Total {time.perf_counter() - started:.0f} s."]
    text = "\n".join(lines) + "\n"
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text(text)
    print(text)
    print(f"written: {out_md}")
    return 0 if sweeps and not any("failed" in n for n in notes) else 1


def single_gpu_variants(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """The single-GPU part's sweeps: (name, extra options)."""
    variants = [("default", []), (f"fused {args.fused}", ["--fused", str(args.fused)]), ("XLA", ["--xla"])]
    if args.device != "cpu":
        variants.append(("mixed precision", ["--mixed-precision"]))
    return variants


def _shell(options: list[str]) -> str:
    return "batchlab " + " ".join(shlex.quote(o) for o in options)


def _sweep_tables(sweeps: dict[str, dict[int, dict]], walls: dict[str, float]) -> list[str]:
    if not sweeps:
        return ["No sweep finished.", ""]
    names = list(sweeps)
    sizes = sorted({b for s in sweeps.values() for b in s})
    lines = ["## Steady samples/s per batch size (tracing s in brackets)", ""]
    lines += ["| batch | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
    for b in sizes:
        cells = []
        for n in names:
            r = sweeps[n].get(b)
            if r is None:
                cells.append("not run")
            elif r["status"] != "ok":
                cells.append(r["status"])  # oom, crashed, diverged: what the run file says
            else:
                cells.append(f"{_num(r['samples_per_s'])} ({_num(r['tracing_s'], 2)})")
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines.append("| **sweep wall s** | " + " | ".join(f"**{walls[n]:.1f}**" for n in names) + " |")
    lines.append(
        "| XLA / precision | " + " | ".join(_execution(sweeps[n]) for n in names) + " |",
    )
    lines += ["", "## Final train loss per batch size", ""]
    lines += ["| batch | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
    for b in sizes:
        losses = [_num(sweeps[n].get(b, {}).get("final_loss", math.nan), 3) for n in names]
        lines.append(f"| {b} | " + " | ".join(losses) + " |")
    first = names[0]
    lines += [
        "",
        f"## Memory of the {first} sweep: TensorFlow allocator peak vs NVML process memory (MiB, largest epoch)",
        "",
        "| batch | TF allocator peak | NVML process memory | NVML - TF | host RSS peak |",
        "|---:|---:|---:|---:|---:|",
    ]
    for b in sizes:
        r = sweeps[first].get(b)
        if r is None:
            continue
        gap = r["nvml_mib"] - r["tf_peak_mib"]
        cells = [_num(v, 1) for v in (r["tf_peak_mib"], r["nvml_mib"], gap, r["rss_mib"])]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "NVML counts the whole process on the GPU (CUDA context, cuBLAS/cuDNN handles and workspaces, the blocks "
        "TensorFlow's allocator keeps pooled); the allocator peak counts only the tensors live at once "
        "(docs/performance.md). '-' = not available on this device.",
        "",
    ]
    return lines


def _execution(runs: dict[int, dict]) -> str:
    xla = {r["xla"] for r in runs.values()}
    precision = {r["precision"] for r in runs.values()}
    return f"xla {'/'.join(map(str, sorted(xla)))}, {'/'.join(sorted(precision))}"


def _last_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


# ---------------------------------------------------------------------------------------------- the multi-GPU part


def count_gpus(args: argparse.Namespace) -> int:
    """The GPUs to plan for: --gpus, else those `batchlab info` lists (as CUDA_VISIBLE_DEVICES shows them)."""
    if args.gpus is not None:
        return args.gpus
    _, info = batchlab(args, "info")
    return sum(1 for line in info.stdout.splitlines() if line.strip().startswith("gpu:"))


def replica_counts(gpus: int) -> list[int]:
    """1, 2, 4, ... up to `gpus`, and `gpus` itself where it is not a power of two."""
    counts, n = [], 1
    while n <= gpus:
        counts.append(n)
        n *= 2
    return counts + ([gpus] if gpus > 1 and counts[-1] != gpus else [])


def multi_gpu_plan(args: argparse.Namespace, gpus: int) -> list[tuple[str, list[str]]]:
    """The multi-GPU part's commands in the order they run: (stage, `batchlab` options). Every sweep trains on
    device auto (`--parallel gpus` gives each run a GPU; `--replicas n` takes the first n)."""
    base = ["sweep", "--preset", PRESET, "--device", "auto", "--overwrite", "--quiet"]
    runs = [f"--{k.replace('_', '-')}={v}" for k, v in PARALLEL_SWEEP.items()]
    if args.samples is not None:
        runs.append(f"--samples={args.samples}")
    plan = [
        ("one at a time", [*base, *runs, "--out", "alone.h5"]),
        ("parallel gpus", [*base, *runs, "--parallel", "gpus", "--out", "parallel.h5"]),
    ]
    scaling = [f"--{k}={v}" for k, v in SCALING_SWEEP.items()]
    for n in replica_counts(gpus):
        sizes = ",".join(str(b * n) for b in PER_REPLICA_BATCHES)
        plan.append(
            (f"replicas {n}", [*base, *scaling, "--replicas", str(n), "--batch-sizes", sizes, "--out", f"r{n}.h5"])
        )
    return plan


def parallel_summary(path: Path) -> dict:
    """What a sweep's file says of its runs: how many ended ok, runs per visible GPU, throughput per run."""
    from batchlab.core.model import SweepData

    sweep = SweepData.from_file(path)
    per_gpu: dict[str, int] = {}
    for run in sweep.ordered_runs():
        gpu = str(run.attrs.get("visible_gpu", run.attrs.get("device", "?")))
        per_gpu[gpu] = per_gpu.get(gpu, 0) + 1
    return {
        "runs": len(sweep.runs),
        "ok": sum(run.status == "ok" for run in sweep.ordered_runs()),
        "per_gpu": per_gpu,
        "samples_per_s": {
            (run.batch_size, run.seed): run.figures.samples_per_s for run in sweep.ordered_runs() if run.status == "ok"
        },
    }


def multi_gpu_tables(gpus: int, walls: dict[str, float], summaries: dict[str, dict], points: list) -> list[str]:
    """The multi-GPU part as markdown: runs at once against one at a time, then weak scaling over replicas
    (`points`: core.analysis.scaling.ScalingPoint of every replica sweep)."""
    from batchlab.core.analysis.scaling import WEAK, scaling_rows

    lines = [f"## Runs at once on {gpus} GPUs (`--parallel gpus`) against one at a time", ""]
    lines += ["| way | wall s | runs ok | runs per GPU |", "|---|---:|---:|---|"]
    for way in ("one at a time", "parallel gpus"):
        if way not in walls:
            lines.append(f"| {way} | not run | | |")
            continue
        got = summaries[way]
        where = ", ".join(f"{gpu}: {n}" for gpu, n in sorted(got["per_gpu"].items()))
        lines.append(f"| {way} | {walls[way]:.1f} | {got['ok']}/{got['runs']} | {where} |")
    if {"one at a time", "parallel gpus"} <= walls.keys():
        alone, paired = summaries["one at a time"]["samples_per_s"], summaries["parallel gpus"]["samples_per_s"]
        moved = sorted(paired[k] / alone[k] for k in alone if k in paired and alone[k] > 0)
        median = moved[len(moved) // 2] if moved else math.nan
        ratio = walls["one at a time"] / walls["parallel gpus"]
        lines += [
            "",
            f"Wall time one at a time / with `--parallel gpus`: **{ratio:.2f}x** on {gpus} GPUs (at most {gpus}x, "
            "less where the runs differ in length or the last runs leave GPUs idle). A run's own steady "
            "throughput with `--parallel gpus` / one at a time, median over runs: "
            f"{_num(median, 2)} (the runs share the host's cores, memory and disk).",
        ]
    lines += ["", "## Weak scaling: replicas at a fixed per-replica batch (MirroredStrategy, `--replicas`)", ""]
    lines += [
        "| per-replica batch | replicas | global batch | samples/s | speedup | efficiency | extra s per step |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = scaling_rows(points, WEAK)
    for p in sorted(points, key=lambda p: (p.per_replica_batch, p.replicas)):
        if p.replicas == 1:
            cells = [p.per_replica_batch, 1, p.global_batch, _num(p.samples_per_s), "1.00x", "100%", "-"]
        else:
            row = next((r for r in rows if r.point is p), None)
            if row is None:  # no one-replica run at this per-replica batch to compare with
                cells = [p.per_replica_batch, p.replicas, p.global_batch, _num(p.samples_per_s), "-", "-", "-"]
            else:
                sync = _num(row.sync_per_step * 1e3, 2) + " ms" if math.isfinite(row.sync_per_step) else "-"
                speed = f"{row.speedup:.2f}x"
                cells = [p.per_replica_batch, p.replicas, p.global_batch, _num(p.samples_per_s), speed, "", sync]
                cells[5] = f"{row.efficiency:.0%}"
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if not points:
        lines.append("| - | no replica sweep finished | | | | | |")
    lines += [
        "",
        "Efficiency = throughput(n) / (n x throughput(1)) (core/analysis/scaling.py); the extra time per step is "
        "the step's time beyond one replica's: the all-reduce and the replicas waiting for each other.",
        "",
    ]
    return lines


def multi_gpu_main(args: argparse.Namespace) -> int:
    """The multi-GPU part: its plan (--dry-run), or its sweeps and their markdown table."""
    gpus = count_gpus(args)
    if gpus < 2:
        print(f"multi-GPU part skipped: {gpus} GPU{'s' if gpus != 1 else ''} found here, it needs 2 or more")
        return 0
    plan = multi_gpu_plan(args, gpus)
    if args.dry_run:
        print(f"multi-GPU part on {gpus} GPUs, {len(plan)} sweeps in this order (each skipped once --budget-s passed):")
        for stage, options in plan:
            print(f"{stage}: {_shell(options)}")
        return 0
    from batchlab.core.analysis.scaling import scaling_points
    from batchlab.core.model import SweepData

    started = time.perf_counter()
    stamp = datetime.now().astimezone()
    out_md = Path(args.out) if args.out else REPO_ROOT / "runs" / f"gpu-figures-multi-{stamp:%Y%m%d-%H%M%S}.md"
    walls: dict[str, float] = {}
    summaries: dict[str, dict] = {}
    runs: list = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for stage, options in plan:
            if time.perf_counter() - started > args.budget_s:
                notes.append(f"{stage}: skipped (time budget of {args.budget_s:.0f} s spent)")
                continue
            options = [str(Path(tmp) / o) if o.endswith(".h5") else o for o in options]
            path = Path(options[-1])
            wall, result = batchlab(args, *options)
            if result.returncode != 0 or not path.exists():
                notes.append(f"{stage}: failed (exit {result.returncode}): {_last_line(result)}")
                continue
            print(f"{stage}: {wall:.1f} s", flush=True)
            if stage.startswith("replicas"):
                runs += SweepData.from_file(path).ordered_runs()
            else:
                walls[stage], summaries[stage] = wall, parallel_summary(path)
    lines = [
        f"# Multi-GPU figures, {stamp.isoformat(timespec='seconds')}",
        "",
        f"Command: `{' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}`  ",
        f"Machine: {platform.node()}, {os.cpu_count()} logical CPUs, {gpus} GPUs",
        "",
        *multi_gpu_tables(gpus, walls, summaries, scaling_points(runs)),
        *[f"- {note}" for note in notes],
        "",
        f"Total {time.perf_counter() - started:.0f} s.",
    ]
    text = "\n".join(lines) + "\n"
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text(text)
    print(text)
    print(f"written: {out_md}")
    return 0 if walls and not any("failed" in n for n in notes) else 1


if __name__ == "__main__":
    sys.exit(main())
