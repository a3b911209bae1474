"""Scaling efficiency of data-parallel runs: throughput against replicas, weak and strong.

A data-parallel run trains one global batch split over `replicas` devices (its run attributes
``replicas`` and ``per_replica_batch``; a run without them is one replica at its batch size).

- Weak scaling: runs at the same per-replica batch, so the global batch grows with the replicas.
- Strong scaling: runs at the same global batch, so each replica's share shrinks.

For each group the baseline is the group's one-replica run (seeds averaged). Speedup(n) =
throughput(n) / throughput(1) and efficiency(n) = speedup(n) / n, so 100% is perfectly linear. The
extra time a step takes beyond the baseline's, in weak scaling where every replica computes the
baseline's batch, is what replicating costs per step: the all-reduce of the gradients and the
replicas waiting for each other. Where a target is set, time to target against replicas is given too.
numpy-free; no TensorFlow, no Qt.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from batchlab.core.analysis.claims import ClaimError, _finite, duration

WEAK = "weak"  # fixed per-replica batch
STRONG = "strong"  # fixed global batch


LOGICAL_CPUS = "logical CPU devices"  # what shared a CPU's cores under --replicas
LOCAL_WORKERS = "worker processes on one host"  # and under --workers on one host


@dataclass(frozen=True)
class ScalingPoint:
    """One (replicas, global batch) of a sweep, its seeds averaged."""

    replicas: int
    global_batch: int
    samples_per_s: float  # steady throughput of the whole run (all replicas), samples/s
    step_time: float  # steady median step compute time, s
    time_to_target: float  # s of training; NaN without a target or where not reached
    runs: int  # how many runs (seeds) were averaged
    shared_cores: bool = False  # replicas were logical CPU devices (device "cpu"): they shared the same cores
    shared_by: str = LOGICAL_CPUS  # what shared the cores: logical CPUs, or worker processes on one host

    @property
    def per_replica_batch(self) -> int:
        return self.global_batch // self.replicas


@dataclass(frozen=True)
class ScalingRow:
    """A point of a scaling curve against its group's one-replica baseline."""

    kind: str  # WEAK or STRONG
    batch: int  # the batch held fixed: per-replica (weak) or global (strong)
    point: ScalingPoint
    baseline: ScalingPoint

    @property
    def replicas(self) -> int:
        return self.point.replicas

    @property
    def speedup(self) -> float:
        return self.point.samples_per_s / self.baseline.samples_per_s

    @property
    def efficiency(self) -> float:
        return self.speedup / self.point.replicas

    @property
    def sync_per_step(self) -> float:
        """Weak scaling only: how much longer a step took than the one-replica step (s); NaN otherwise."""
        if self.kind != WEAK:
            return math.nan
        return self.point.step_time - self.baseline.step_time

    def check(self) -> None:
        _finite("throughput", self.point.samples_per_s, self.baseline.samples_per_s)
        if self.point.samples_per_s <= 0 or self.baseline.samples_per_s <= 0:
            raise ClaimError("throughput: not positive")

    def text(self) -> str:
        """ "4 replicas: 3.1x the throughput of one (78% efficient); a step took 2.1 ms longer than one
        replica's (the all-reduce and waiting for the slowest replica)"."""
        self.check()
        n, speedup, efficiency = self.point.replicas, self.speedup, self.efficiency
        if speedup < 1:
            relation = f"{_times(1 / speedup)} less throughput than one (a slowdown; {efficiency:.0%} efficient)"
        elif efficiency > 1.005:
            relation = f"{_times(speedup)} the throughput of one ({efficiency:.0%} efficient: more than linear)"
        else:
            relation = f"{_times(speedup)} the throughput of one ({efficiency:.0%} efficient)"
        fixed = f"per-replica batch {self.batch:,}" if self.kind == WEAK else f"global batch {self.batch:,}"
        text = f"{n} replicas at {fixed}: {relation}"
        sync = self.sync_per_step
        if math.isfinite(sync) and sync > 0 and self.point.shared_cores:
            text += (
                f"; a step took {duration(sync)} longer than one replica's ({self.point.shared_by}: the replicas share "
                "the same cores, so this includes their competing for them, not only the all-reduce)"
            )
        elif math.isfinite(sync) and sync > 0:
            text += f"; a step took {duration(sync)} longer than one replica's (the all-reduce and the replicas' waits)"
        elif math.isfinite(sync):
            text += "; a step took no longer than one replica's"
        reached, base = self.point.time_to_target, self.baseline.time_to_target
        if math.isfinite(reached) and math.isfinite(base) and reached > 0:
            text += f"; time to target {duration(reached)} against {duration(base)} on one"
        return text


def _times(ratio: float) -> str:
    """A ratio in two significant digits ("3.2x"), three where two would round it to 1 ("1.04x", not "1x")."""
    text = f"{ratio:.2g}"
    return f"{ratio:.3g}x" if text == "1" else f"{text}x"


def _one_host(attrs: dict) -> bool:
    """Whether a run's replicas were on one host: always, except a multi-worker run whose workers' addresses
    (worker_addresses, "host:port,...") name several hosts."""
    hosts = {a.rpartition(":")[0] for a in str(attrs.get("worker_addresses", "") or "").split(",") if a}
    return len(hosts) <= 1


def run_replicas(attrs: dict) -> int:
    """How many replicas trained a run (1 for a run without the attribute: every run before data parallelism)."""
    try:
        replicas = int(attrs.get("replicas", 1))
    except (TypeError, ValueError):
        return 1
    return max(1, replicas)


def scaling_points(runs: Iterable) -> list[ScalingPoint]:
    """The finished runs (status ok, a finite throughput) grouped by (replicas, global batch), seeds averaged.
    `runs` are core.model.RunData (their batch_size is the global batch)."""
    groups: dict[tuple[int, int], list] = defaultdict(list)
    on_cpu: dict[tuple[int, int], bool] = defaultdict(bool)
    workers: dict[tuple[int, int], bool] = defaultdict(bool)  # its replicas were worker processes (--workers)
    for run in runs:
        figures = run.figures
        if run.status != "ok" or not math.isfinite(figures.samples_per_s) or figures.samples_per_s <= 0:
            continue
        key = (run_replicas(run.attrs), int(run.batch_size))
        groups[key].append(figures)
        on_cpu[key] |= key[0] > 1 and str(run.attrs.get("device", "")) == "cpu" and _one_host(run.attrs)
        workers[key] |= int(run.attrs.get("workers", 1) or 1) > 1
    points = []
    for (replicas, batch), figures in sorted(groups.items()):
        reached = [f.time_to_target for f in figures if math.isfinite(f.time_to_target)]
        points.append(
            ScalingPoint(
                replicas=replicas,
                global_batch=batch,
                samples_per_s=_mean(f.samples_per_s for f in figures),
                step_time=_mean(f.step_time for f in figures),
                time_to_target=_mean(reached) if len(reached) == len(figures) else math.nan,
                runs=len(figures),
                shared_cores=on_cpu[(replicas, batch)],
                shared_by=LOCAL_WORKERS if workers[(replicas, batch)] else LOGICAL_CPUS,
            )
        )
    return points


def scaling_rows(points: list[ScalingPoint], kind: str) -> list[ScalingRow]:
    """Every point with more than one replica whose group (same per-replica batch for WEAK, same global batch
    for STRONG) has a one-replica baseline, in order of batch then replicas."""
    key = (lambda p: p.per_replica_batch) if kind == WEAK else (lambda p: p.global_batch)
    baselines = {key(p): p for p in points if p.replicas == 1}
    rows = [ScalingRow(kind, key(p), p, baselines[key(p)]) for p in points if p.replicas > 1 and key(p) in baselines]
    return sorted(rows, key=lambda r: (r.batch, r.replicas))


def scaling_lines(runs: Iterable) -> list[str]:
    """The scaling sentences of a sweep (empty when no run trained on more than one replica)."""
    points = scaling_points(runs)
    if not any(p.replicas > 1 for p in points):
        return []
    lines = [row.text() for kind in (WEAK, STRONG) for row in scaling_rows(points, kind)]
    if not lines:
        many = sorted({p.replicas for p in points if p.replicas > 1})
        return [
            f"Scaling: runs on {', '.join(map(str, many))} replicas, but none with a one-replica run at the same "
            "per-replica or global batch to compare with; add replicas 1 to the comparison (a sweep at --replicas 1 "
            "with the same batch sizes: batchlab report FILE --scaling-with ONE_REPLICA_FILE)"
        ]
    return lines


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else math.nan
