"""Synthetic benchmark run files written by the one writer (no TensorFlow), with figures known by construction.

Each run is one epoch of STEPS steps whose wall times are evenly spaced `dt` apart: its steady throughput is
batch / dt samples/s, its step time `step_time`, its peak memory `memory` bytes, its one-time cost
`startup` s (no traced step: tracing 0).
"""

from __future__ import annotations

from pathlib import Path

from batchlab.core.events import make_event, now_iso
from batchlab.core.runfile import RunFileWriter
from batchlab.core.spec import build_spec

STEPS = 20


def write_bench(path: Path, runs: list[dict], version: int = 1, suite: str = "batchlab-bench") -> Path:
    """`runs`: dicts with batch_size, seed, dt, step_time, memory, startup; one workload, mlp."""
    sizes = sorted({r["batch_size"] for r in runs})
    seeds = sorted({r["seed"] for r in runs})
    spec = build_spec({"preset": "mnist-mlp", "samples": 1024, "epochs": 1, "batch_sizes": sizes, "seeds": seeds})
    root = {"bench_suite": suite, "bench_suite_version": version, "bench_workload": "mlp", "bench_repeats": len(seeds)}
    root.update(machine_cpu_model="test CPU", machine_cpu_cores=2, machine_memory_bytes=1 << 34)
    writer = RunFileWriter(path)
    events = [
        make_event(
            "sweep_started",
            spec=spec.to_dict(),
            runs=[{"index": i, "batch_size": r["batch_size"], "seed": r["seed"]} for i, r in enumerate(runs)],
            environment={"device_description": "cpu: test CPU"},
            started=now_iso(),
            root_attrs=root,
        )
    ]
    for index, r in enumerate(runs):
        events += _run_events(index, r)
    events.append(make_event("sweep_ended", status="complete", message="", ended=now_iso()))
    for event in events:
        writer.handle(event)
    writer.close()
    return path


def _run_events(index: int, r: dict) -> list[dict]:
    batch, dt = r["batch_size"], r["dt"]
    started = make_event(
        "run_started",
        run=index,
        batch_size=batch,
        seed=r["seed"],
        pid=1,
        device="cpu",
        steps_per_epoch=STEPS,
        epochs=1,
        samples=STEPS * batch,
        started=now_iso(),
        startup_s=r["startup"],
    )
    steps = make_event(
        "steps",
        run=index,
        step=list(range(STEPS)),
        epoch=[0] * STEPS,
        loss=[1.0] * STEPS,
        batch_size=[batch] * STEPS,
        step_time=[r["step_time"]] * STEPS,
        fetch_time=[dt - r["step_time"]] * STEPS,
        input_wait=[0.0] * STEPS,
        traced=[0] * STEPS,
        wall_time=[dt * (i + 1) for i in range(STEPS)],
    )
    epoch = make_event(
        "epoch_ended",
        run=index,
        epoch=0,
        epoch_time=dt * STEPS,
        train_loss=1.0,
        samples_per_s=batch / dt,
        tf_peak_bytes=-1,
        device_memory_bytes=-1,
        rss_peak_bytes=r["memory"],
        traced_steps=0,
        wall_time=dt * STEPS,
    )
    ended = make_event(
        "run_ended", run=index, status=r.get("status", "ok"), message="", ended=now_iso(), total_time=dt * STEPS
    )
    return [started, steps, epoch, ended]
