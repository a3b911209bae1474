"""The machine a benchmark ran on, gathered in the parent without TensorFlow: CPU, memory and NVIDIA GPUs.

The CPU model comes from /proc/cpuinfo (Linux) or the platform module, the cores and memory from
psutil, the GPUs from ``nvidia-smi`` when it is installed (name, memory, driver, compute capability).
TensorFlow's own view (its versions, CUDA, cuDNN and the devices it sees) is the sweep's environment,
which the training child reports; the matmul peak is measured in a child too (core/sweep/peak.py).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import psutil

NVIDIA_SMI_TIMEOUT_S = 20.0
NVIDIA_SMI_FIELDS = ("name", "memory.total", "driver_version", "compute_cap")
MIB = 1 << 20


def cpu_model() -> str:
    """The CPU's model name as the OS reports it ("" when unknown)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or ""


def nvidia_gpus(run=subprocess.run) -> list[dict[str, Any]]:
    """Every GPU nvidia-smi lists: name, memory_bytes, driver, compute_capability; [] without nvidia-smi.

    `run` is subprocess.run (injectable for tests). A failing nvidia-smi (no driver) gives [].
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    query = f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}"
    try:
        done = run(
            [exe, query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    return parse_nvidia_smi(done.stdout)


def parse_nvidia_smi(text: str) -> list[dict[str, Any]]:
    """The rows of `nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader,
    nounits` (memory in MiB) as dicts."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(NVIDIA_SMI_FIELDS) or not parts[0]:
            continue
        name, memory, driver, capability = parts
        try:
            memory_bytes = int(float(memory) * MIB)
        except ValueError:
            memory_bytes = -1
        gpus.append({"name": name, "memory_bytes": memory_bytes, "driver": driver, "compute_capability": capability})
    return gpus


def tensorflow_gpus(environment: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPUs the training child's TensorFlow saw (no driver version there), for a machine without nvidia-smi."""
    gpus = []
    for device in environment.get("devices") or []:
        if device.get("kind") != "GPU":
            continue
        description = str(device.get("description", ""))
        name, _, rest = description.partition(" (compute capability ")
        gpus.append(
            {
                "name": name,
                "memory_bytes": int(device.get("memory_bytes", -1) or -1),
                "driver": "",
                "compute_capability": rest.rstrip(")") if rest else "",
            }
        )
    return gpus


def machine_attrs(environment: dict[str, Any] | None = None) -> dict[str, Any]:
    """The machine as run-file root attributes (docs/runfile-format.md, *Benchmark files*).

    `environment`: the sweep's (from the training child), whose GPUs are used when nvidia-smi is absent.
    """
    gpus = nvidia_gpus() or tensorflow_gpus(environment or {})
    return {
        "machine_cpu_model": cpu_model(),
        "machine_cpu_cores": int(psutil.cpu_count(logical=False) or 0),
        "machine_cpu_threads": int(os.cpu_count() or 0),
        "machine_memory_bytes": int(psutil.virtual_memory().total),
        "machine_gpu_count": len(gpus),
        "machine_gpus": json.dumps(gpus, sort_keys=True),
        "machine_gpu_driver": ", ".join(sorted({g["driver"] for g in gpus if g.get("driver")})),
    }


def describe_machine(attrs: dict[str, Any]) -> str:
    """One line: CPU, cores, memory, GPUs and TensorFlow, from a bench file's root attributes."""
    gpus = _gpus(attrs)
    gpu_text = ", ".join(
        f"{g.get('name', '?')} ({_gib(g.get('memory_bytes', -1))}, cc {g.get('compute_capability') or '?'})"
        for g in gpus
    )
    driver = attrs.get("machine_gpu_driver") or ""
    return (
        f"{attrs.get('machine_cpu_model') or 'unknown CPU'}, {attrs.get('machine_cpu_cores', '?')} cores / "
        f"{attrs.get('machine_cpu_threads', '?')} threads, {_gib(attrs.get('machine_memory_bytes', -1))} memory; "
        + (f"GPUs: {gpu_text}" + (f", driver {driver}" if driver else "") if gpus else "no GPU")
        + f"; TensorFlow {attrs.get('tensorflow_version', '?')}, CUDA {attrs.get('cuda_version', '?')}, "
        f"cuDNN {attrs.get('cudnn_version', '?')}"
    )


def _gpus(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        gpus = json.loads(attrs.get("machine_gpus") or "[]")
    except ValueError:
        return []
    return [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []


def _gib(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "? GiB"
    return f"{number / (1 << 30):.1f} GiB" if number > 0 else "? GiB"
