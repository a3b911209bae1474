"""Placement: where a sweep's runs execute and how many at once (core/sweep/launcher.py and its launchers;
docs/scaling.md).

- `parallel`: "" (one run at a time, the default), "gpus" (one run per local GPU, each child seeing only its
  own GPU) or a number N >= 2 (N runs at once; on a CPU they share cores, so every such run carries a
  warning that its times mean little).
- `ray`: "" (this machine's child processes) or a Ray cluster to submit each run to: "auto" (the cluster
  this machine belongs to), "local" (start a Ray instance here) or a "ray://host:port" client address.
- `ray_cpus`: the CPU share a run asks Ray for when it trains on a CPU (a run on a GPU asks for one GPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchlab.core.errors import SpecError
from batchlab.core.presets import DEFAULT_PRESET, preset_defaults
from batchlab.core.settings.base import Setting, SettingsGroup, blank, fail, number

DEFAULTS = preset_defaults(DEFAULT_PRESET)
PARALLEL_GPUS = "gpus"
MAX_PARALLEL = 64
RAY_AUTO = "auto"
RAY_LOCAL = "local"
RAY_CLIENT_PREFIX = "ray://"
MAX_RAY_CPUS = 1024.0


@dataclass(frozen=True)
class PlacementSettings:
    parallel: str = DEFAULTS["parallel"]  # "": one at a time; "gpus": one per local GPU; "N": N at once
    ray: str = DEFAULTS["ray"]  # "": local child processes; auto, local or ray://host:port
    ray_cpus: float = DEFAULTS["ray_cpus"]  # CPUs a run asks Ray for when it trains on a CPU


def parse_parallel(value: Any) -> str:
    """ "" (one run at a time), "gpus" (one run per local GPU) or "N" for N >= 2 runs at once."""
    what = f"parallel must be gpus (one run per local GPU) or a number of runs at once from 1 to {MAX_PARALLEL}"
    if blank(value):
        return ""
    text = str(value).strip().lower()
    if text in ("gpus", "gpu"):
        return PARALLEL_GPUS
    if text in ("off", "no", "none", "false"):
        return ""
    try:
        n = int(text)
    except ValueError:
        raise SpecError("parallel", f"{str(value)!r} is not known; {what}") from None
    if n < 1:
        raise SpecError("parallel", f"{n} is too small; {what}")
    if n > MAX_PARALLEL:
        raise SpecError("parallel", f"{n} is too large; {what}")
    return "" if n == 1 else str(n)


def parse_ray(value: Any) -> str:
    """ "" (no Ray), "auto", "local" or a "ray://host:port" address."""
    what = "ray must be auto (this machine's cluster), local (start one here) or ray://host:port"
    if blank(value):
        return ""
    text = str(value).strip()
    if text.lower() in (RAY_AUTO, RAY_LOCAL):
        return text.lower()
    if text.lower().startswith(RAY_CLIENT_PREFIX):
        host, _, port = text[len(RAY_CLIENT_PREFIX) :].rpartition(":")
        if host and port.isdigit() and 0 < int(port) < 65536:
            return RAY_CLIENT_PREFIX + text[len(RAY_CLIENT_PREFIX) :]
        raise SpecError("ray", f"{text!r} has no host:port after ray://; {what}")
    raise SpecError("ray", f"{text!r} is not known; {what}")


def parse_ray_cpus(value: Any) -> float:
    what = f"ray_cpus must be a number of CPUs per run above 0 and at most {MAX_RAY_CPUS:g} (fractions allowed)"
    if blank(value):
        return 1.0
    cpus = number("ray_cpus", value, what)
    if cpus <= 0:
        raise SpecError("ray_cpus", f"{cpus:g} is too small; {what}")
    if cpus > MAX_RAY_CPUS:
        raise SpecError("ray_cpus", f"{cpus:g} is too large; {what}")
    return cpus


def parallel_runs(parallel: str) -> int | None:
    """How many runs `parallel` keeps in flight: 1 for "", N for "N", None for "gpus" (the GPUs found)."""
    if parallel == PARALLEL_GPUS:
        return None
    return int(parallel) if parallel else 1


def _check_placement(p: dict[str, Any], errors: dict[str, SpecError]) -> None:
    parallel, ray = p.get("parallel", ""), p.get("ray", "")
    if "parallel" in errors or "ray" in errors:
        return
    if parallel and ray:
        fail(
            errors,
            "parallel",
            f"{parallel} is not allowed with ray {ray}: Ray decides how many runs train at once (one per free "
            "GPU, or per ray_cpus CPUs); leave parallel empty",
        )
    elif parallel == PARALLEL_GPUS and p.get("device") == "cpu":
        fail(errors, "parallel", "gpus is not allowed with device cpu; use device auto, or parallel N for CPU runs")
    elif parallel == PARALLEL_GPUS and str(p.get("device", "")).startswith("gpu:"):
        fail(
            errors,
            "parallel",
            f"gpus is not allowed with device {p.get('device')}: each run gets a GPU of its own; use device auto",
        )


GROUP = SettingsGroup(
    name="placement",
    title="Where runs execute",
    values=PlacementSettings,
    settings=(
        Setting(
            "parallel",
            "text",
            parse_parallel,
            "runs in flight at once: empty for one at a time; gpus for one run per local GPU (each run's process "
            "sees only its GPU, recorded per run); a number N for N at once (on a CPU they share cores and their "
            "times mean little: every such run is recorded with a warning)",
            label="Runs at once",
            option="--parallel",
            placeholder="one at a time; gpus, or a number",
        ),
        Setting(
            "ray",
            "text",
            parse_ray,
            "submit each run to a Ray cluster (pip install 'batchlab[cluster]'): auto (the cluster this machine "
            "belongs to), local (start a Ray instance here) or ray://host:port; empty: this machine's processes",
            label="Ray cluster",
            option="--ray",
            placeholder="this machine (no Ray)",
        ),
        Setting(
            "ray_cpus",
            "float",
            parse_ray_cpus,
            "with --ray: the CPUs each run asks Ray for when it trains on a CPU (a run on a GPU asks for one GPU)",
            label="Ray CPUs per run",
            option="--ray-cpus",
            placeholder="1",
        ),
    ),
    checks=(_check_placement,),
)
