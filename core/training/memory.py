"""Process memory readings: host peak RSS (resettable on Linux) and GPU memory as nvidia-smi shows it."""

from __future__ import annotations

import os
import re

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


def tf_gpu_pci_bus_id(tf_device: str | None) -> str | None:
    """PCI bus id ("0000:3b:00.0") of a TensorFlow GPU ("GPU:0"), from TensorFlow's device description; None
    when unknown. NVML numbers devices in PCI order, CUDA (and so TensorFlow, and CUDA_VISIBLE_DEVICES) by
    default fastest first, so on a machine with mixed GPUs the same index can name two different devices."""
    if not tf_device or "GPU" not in tf_device.upper():
        return None
    try:
        from tensorflow.python.client import device_lib  # the only TF API that reports the bus id

        wanted = tf_device.upper().rsplit(":", 1)[-1]
        for d in device_lib.list_local_devices():
            if d.device_type == "GPU" and d.name.upper().rsplit(":", 1)[-1] == wanted:
                match = re.search(r"pci bus id: ([0-9a-fA-F:.]+)", d.physical_device_desc)
                return match.group(1) if match else None
    except Exception:  # an old TensorFlow, no GPU: fall back to the index
        return None
    return None


def _nvml_bus_ids(bus_id: str) -> list[str]:
    """The forms NVML may expect: as given, and with the 8-digit domain nvidia-smi prints."""
    domain, _, rest = bus_id.partition(":")
    return [bus_id, f"{int(domain, 16):08x}:{rest}"] if rest else [bus_id]


class GpuProcessMemory:
    """This process's memory on one GPU via NVML (what nvidia-smi lists), or UNKNOWN without NVML.

    The device is found by its PCI bus id when known (`pci_bus_id`), else by `nvml_index`."""

    def __init__(self, nvml_index: int | None, pci_bus_id: str | None = None):
        self._handle = None
        self._nvml = None
        if nvml_index is None and pci_bus_id is None:
            return
        try:
            import pynvml  # nvidia-ml-py; only useful where an NVIDIA driver exists

            pynvml.nvmlInit()
            self._nvml = pynvml
        except Exception:  # no driver, no device: memory stays unknown rather than failing the run
            return
        for bus in _nvml_bus_ids(pci_bus_id) if pci_bus_id else []:
            try:
                self._handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
                return
            except Exception:
                continue
        if nvml_index is not None:
            try:
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(nvml_index)
            except Exception:
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
        self.gpu = GpuProcessMemory(nvml_index, tf_gpu_pci_bus_id(tf_device) if nvml_index is not None else None)
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
