"""Process memory readings: host peak RSS (resettable on Linux) and GPU memory as nvidia-smi shows it."""

from __future__ import annotations

import os

import psutil
from batchlab.core.training.hooks import Hook

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


def current_rss_bytes() -> int:
    """This process's resident memory now, in bytes."""
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


class MemoryProbe(Hook):
    """Hook: peak memory per epoch, reset when an epoch begins and read when its training steps end
    (at on_test_begin when there is validation, so the peak is the training step's): the TensorFlow
    allocator peak on `tf_device`, this process's GPU memory (NVML) and the host's peak RSS, in bytes."""

    def __init__(self, tf_device: str | None, nvml_index: int | None):
        self.tf_device = tf_device
        self.gpu = GpuProcessMemory(nvml_index)
        self._reading: dict[str, int] | None = None

    def read(self) -> dict[str, int]:
        tf_peak = UNKNOWN
        if self.tf_device:
            import tensorflow as tf  # only here: the probe runs in the training child

            tf_peak = int(tf.config.experimental.get_memory_info(self.tf_device)["peak"])
        return {
            "tf_peak_bytes": tf_peak,
            "device_memory_bytes": self.gpu.used_bytes(),
            "rss_peak_bytes": peak_rss_bytes(),
        }

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        self._reading = None
        if self.tf_device:
            import tensorflow as tf

            tf.config.experimental.reset_memory_stats(self.tf_device)
        reset_peak_rss()

    def on_test_begin(self, logs=None) -> None:
        self._reading = self.read()

    def on_epoch_end(self, epoch: int, logs) -> None:
        logs.update(self._reading or self.read())
