"""GPU figures in one command: the mnist-autoencoder sweep, its fused, XLA and mixed-precision variants, the
max-batch finder and TensorFlow's allocator peak beside NVML's process memory, as one markdown table.

    .venv/bin/python bench/gpu_figures.py                      # on an NVIDIA GPU (gpu:0), under 8 minutes
    .venv/bin/python bench/gpu_figures.py --device cpu --smoke # a short check of the script on a CPU

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
    started = time.perf_counter()
    stamp = datetime.now().astimezone()
    out_md = Path(args.out) if args.out else REPO_ROOT / "runs" / f"gpu-figures-{stamp:%Y%m%d-%H%M%S}.md"
    variants = [("default", []), (f"fused {args.fused}", ["--fused", str(args.fused)]), ("XLA", ["--xla"])]
    if args.device != "cpu":
        variants.append(("mixed precision", ["--mixed-precision"]))
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


if __name__ == "__main__":
    sys.exit(main())
