"""The matmul peak of each device, measured once in a child process and cached in a small JSON file.

The cache lives in the user's cache folder (as platformdirs names it): $XDG_CACHE_HOME/batchlab
or ~/.cache/batchlab on Linux, ~/Library/Caches/batchlab on macOS, %LOCALAPPDATA%\\batchlab\\Cache
on Windows; BATCHLAB_CACHE_DIR overrides it. File: matmul_peak.json, keyed by the device's
description as run files record it (environment's ``device_description``), so a run file's
utilisation is reported only against a peak measured on the same kind of device.
"""

from __future__ import annotations

import json
import multiprocessing
import tempfile
from pathlib import Path
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.events import now_iso
from batchlab.core.paths import CACHE_ENV, user_cache_dir  # noqa: F401 (CACHE_ENV: part of this module's API)

CACHE_FILE = "matmul_peak.json"
CACHE_FORMAT = 1
MEASURE_TIMEOUT_SECONDS = 300.0


def cache_path() -> Path:
    return user_cache_dir() / CACHE_FILE


def read_peaks() -> dict[str, dict[str, Any]]:
    """Every cached peak by device description; empty when the file is missing or unreadable."""
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    peaks = data.get("peaks") if isinstance(data, dict) else None
    return {k: v for k, v in (peaks or {}).items() if isinstance(v, dict)}


def cached_peak(device_description: str) -> float | None:
    """The cached peak (FLOP/s) of a device, or None when it was never measured."""
    entry = read_peaks().get(str(device_description))
    try:
        value = float(entry["flops_per_s"]) if entry else None
    except (KeyError, TypeError, ValueError):
        return None
    return value if value and value > 0 else None


def store_peak(result: dict[str, Any]) -> Path:
    """Add or replace one device's measured peak in the cache file (written whole, then renamed)."""
    peaks = read_peaks()
    entry = {k: v for k, v in result.items() if k not in ("type", "device_description")}
    entry["measured"] = now_iso()
    peaks[str(result["device_description"])] = entry
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"format": CACHE_FORMAT, "peaks": peaks}, indent=2, sort_keys=True))
    tmp.replace(path)
    return path


def measure_peak(device: str = "auto") -> dict[str, Any]:
    """Measure the matmul peak of `device` in a fresh child process, cache it and return it."""
    from batchlab.core.sweep.processes import _death_message, start_child
    from batchlab.core.training.peak import PEAK_RESULT, peak_main

    ctx = multiprocessing.get_context("spawn")
    log_path = Path(tempfile.mkdtemp(prefix="batchlab-peak-")) / "peak.log"
    receiver, sender = ctx.Pipe(duplex=False)
    child = ctx.Process(target=peak_main, args=(device, sender, str(log_path)), daemon=True, name="batchlab-peak")
    start_child(child)
    sender.close()
    try:
        if not receiver.poll(MEASURE_TIMEOUT_SECONDS):
            raise SpecError("peak", f"the measurement did not finish in {MEASURE_TIMEOUT_SECONDS:.0f} s")
        message = receiver.recv()
    except EOFError:
        child.join()
        raise SpecError("peak", f"could not measure: {_death_message(child.exitcode, log_path)}") from None
    finally:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
            child.join()
    if message.get("type") != PEAK_RESULT:
        raise SpecError("peak", f"could not measure: {message.get('message')}")
    store_peak(message)
    return message
