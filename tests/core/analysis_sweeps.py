"""Synthetic train-to-target sweeps with known answers for the analysis tests (no TensorFlow)."""

import math

import numpy as np
from batchlab.core.events import make_event
from batchlab.core.model import SweepData

SMIN, BCRIT = 40.0, 64.0  # steps, samples: S(B) = SMIN (1 + BCRIT / B)
ALPHA, BETA = 2e-3, 25e-6  # s, s per sample: the wall time of a steady step
SAMPLES = 20_000
TARGET = "val_loss=0.5"


def steps_to_target(b: float) -> float:
    return SMIN * (1 + BCRIT / b)


def target_sweep(
    sizes=(8, 16, 32, 64, 128, 256, 512),
    seeds=(0, 1),
    noise=0.05,
    missed=(),
    lr=0.05,
    rng_seed=3,
    b_simple=None,
    alpha=ALPHA,
    linear_from=None,
):
    """A sweep whose run at batch B reaches val_loss < 0.5 after S(B) x (multiplicative noise) steps, with steady
    steps of alpha + BETA*B s, host memory 300 MiB + 0.2 MiB x B, loss noise falling as 1/sqrt(B).
    Batch sizes in `missed` train 2 S(B) steps and never meet the target. With `b_simple`, every run measured
    the gradient noise scale every 10 steps: tr(Sigma) = b_simple x |G|^2 (b_simple x (1 + run index / 100)).
    With `linear_from` B0 the rate follows the linear rule, lr x B/B0 after 10 warmup steps from lr."""

    def rule(b):
        if linear_from is None:
            return {"lr_rule": "constant", "lr_warmup_steps": 0}
        peak = lr * b / linear_from
        return {"lr_rule": "linear", "lr0": lr, "lr_base_batch": linear_from, "lr_peak": peak, "lr_warmup_steps": 10}

    rng = np.random.default_rng(rng_seed)
    data = SweepData()
    spec = {"target": TARGET, "eval_every": 10}
    data.handle(make_event("sweep_started", spec=spec, runs=[], environment={"device_description": "cpu: test"}))
    index = 0
    for b in sizes:
        for seed in seeds:
            reach = max(3, round(steps_to_target(b) * math.exp(rng.normal(0, noise))))
            n = 2 * reach if b in missed else reach
            data.handle(
                make_event(
                    "run_started",
                    run=index,
                    batch_size=b,
                    seed=seed,
                    samples=SAMPLES,
                    target=TARGET,
                    lr=lr,
                    lr_schedule="constant",
                    **rule(b),
                )
            )
            step_time = np.full(n, alpha + BETA * b)
            step_time[0] = 0.5  # tracing
            traced = np.zeros(n, dtype=int)
            traced[0] = 1
            wall = np.cumsum(step_time)
            loss = 1.0 + 0.5 * np.exp(-np.arange(n) / reach) + rng.normal(0, 0.4 / math.sqrt(b), n)
            data.handle(steps_event(index, b, loss, step_time, traced, wall))
            if b_simple is not None:
                rows = list(range(0, n, 10))
                value = b_simple * (1 + index / 100)
                ones = [1.0] * len(rows)
                data.handle(
                    make_event(
                        "noise_scale",
                        run=index,
                        step=rows,
                        g2_est=ones,
                        trace_est=[value] * len(rows),
                        ema_g2=ones,
                        ema_trace=[value] * len(rows),
                        b_simple=[value] * len(rows),
                    )
                )
            points = sorted({reach // 2, reach, n})
            for s in points:
                met = s >= reach and b not in missed
                data.handle(
                    make_event(
                        "evaluation",
                        run=index,
                        steps=s,
                        examples=s * b,
                        epochs=s * b / SAMPLES,
                        wall_time=float(wall[s - 1]),
                        train_wall_time=float(wall[s - 1]),
                        eval_time=0.1,
                        at_epoch_end=0,
                        train_loss=0.3 + 0.0002 * b,
                        val_loss=0.45 if met else 0.9,
                    )
                )
            data.handle(
                make_event(
                    "epoch_ended",
                    run=index,
                    epoch=0,
                    train_loss=1.0,
                    val_loss=1.1,
                    epoch_time=float(wall[-1]),
                    wall_time=float(wall[-1]),
                    traced_steps=1,
                    rss_peak_bytes=int((300 + 0.2 * b) * 2**20),
                )
            )
            data.handle(make_event("run_ended", run=index, status="ok", message="", total_time=float(wall[-1])))
            index += 1
    return data


def steps_event(index: int, batch: int, loss, step_time, traced=None, wall=None) -> dict:
    """One run's whole epoch-0 `steps` event: n steps of `batch` samples, their losses and step times (s); traced
    steps as given (none by default), wall_time the steps' running sum unless given."""
    n = len(loss)
    step_time = np.asarray(step_time, dtype=float)
    return make_event(
        "steps",
        run=index,
        step=list(range(n)),
        epoch=[0] * n,
        loss=list(np.asarray(loss, dtype=float)),
        batch_size=[batch] * n,
        step_time=step_time.tolist(),
        fetch_time=[0.0] * n,
        input_wait=[0.0] * n,
        traced=[0] * n if traced is None else list(traced),
        wall_time=(np.cumsum(step_time) if wall is None else np.asarray(wall)).tolist(),
    )
