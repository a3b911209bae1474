"""Process memory readings: host peak RSS (resettable on Linux) and GPU memory as nvidia-smi shows it."""

from __future__ import annotations

import os

import psutil

_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"
UNKNOWN = -1


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter (VmHWM) for this process; False where unsupported."""
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")  # "5" resets the peak resident set size (Linux >= 4.0)
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    """Peak resident memory since the last reset (Linux VmHWM), else the current RSS, in bytes."""
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(psutil.Process().memory_info().rss)


class GpuProcessMemory:
    """This process's memory on one GPU via NVML (what nvidia-smi lists), or UNKNOWN without NVML."""

    def __init__(self, nvml_index: int | None):
        self._handle = None
        self._nvml = None
        if nvml_index is None:
            return
        try:
            import pynvml  # nvidia-ml-py; only useful where an NVIDIA driver exists

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(nvml_index)
            self._nvml = pynvml
        except Exception:  # no driver, no device: memory stays unknown rather than failing the run
            self._handle = None

    def used_bytes(self) -> int:
        if self._handle is None:
            return UNKNOWN
        pid = os.getpid()
        try:
            procs = self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)
        except Exception:
            return UNKNOWN
        for p in procs:
            if p.pid == pid and p.usedGpuMemory is not None:
                return int(p.usedGpuMemory)
        return UNKNOWN

    def total_bytes(self) -> int:
        if self._handle is None:
            return UNKNOWN
        try:
            return int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).total)
        except Exception:
            return UNKNOWN
