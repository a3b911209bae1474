"""The explanation in words: built from the sweep's numbers, naming only what the data show.

Synthetic sweeps with known step times, input wait and memory (no TensorFlow), and one real
sweep through the command line whose `report` prints alpha, beta and B*."""

import math
import re

import numpy as np
import pytest
from batchlab.core.analysis.explain import explain_sweep
from batchlab.core.analysis.startup import one_time_costs
from batchlab.core.analysis.step_time import sweep_step_time
from batchlab.core.events import make_event
from batchlab.core.model import SweepData

from tests.core.test_cli import TINY, batchlab

ALPHA, BETA = 2e-3, 20e-6  # s, s per sample: B* = 100
M0, M1 = 700 * 2**20, 0.5 * 2**20  # bytes, bytes per sample
SAMPLES = 4096
FLOPS = 6.0e5  # per training sample


def synthetic_sweep(sizes=(8, 32, 128, 512), wait=None, flops=FLOPS, slow=None) -> SweepData:
    """A sweep whose steady steps take exactly ALPHA + BETA*B, plus `wait[B]` s of input wait per step;
    `slow[B]` = (n, factor): the last n steps of each epoch at B take `factor` times as long."""
    wait, slow = wait or {}, slow or {}
    data = SweepData()
    data.handle(make_event("sweep_started", spec={}, runs=[], environment={"device_description": "cpu: test"}))
    for index, b in enumerate(sizes):
        n = math.ceil(SAMPLES / b)
        data.handle(
            make_event("run_started", run=index, batch_size=b, seed=0, steps_per_epoch=n, epochs=2, samples=SAMPLES)
        )
        if flops:
            data.runs[index].attrs["flops_per_sample"] = flops
        wall = 0.0
        for epoch in range(2):
            step_time = np.full(n, ALPHA + BETA * b)
            if b in slow:
                step_time[n - slow[b][0] :] *= slow[b][1]
            traced = np.zeros(n, dtype=int)
            if epoch == 0:
                step_time[0], traced[0] = 0.8, 1
            input_wait = np.full(n, wait.get(b, 0.0))
            fetch = input_wait + 1e-4
            walls = wall + np.cumsum(fetch + step_time)
            data.handle(
                make_event(
                    "steps",
                    run=index,
                    step=list(range(epoch * n, (epoch + 1) * n)),
                    epoch=[epoch] * n,
                    loss=[1.0] * n,
                    batch_size=[b] * n,
                    step_time=step_time.tolist(),
                    fetch_time=fetch.tolist(),
                    input_wait=input_wait.tolist(),
                    traced=traced.tolist(),
                    wall_time=walls.tolist(),
                )
            )
            data.handle(
                make_event(
                    "epoch_ended",
                    run=index,
                    epoch=epoch,
                    train_loss=1.0,
                    epoch_time=float(walls[-1] - wall),
                    wall_time=float(walls[-1]),
                    traced_steps=int(traced.sum()),
                    rss_peak_bytes=int(M0 + M1 * b),
                )
            )
            wall = float(walls[-1])
        data.handle(make_event("run_ended", run=index, status="ok", message="", total_time=wall))
    return data


def test_the_explanation_states_the_fitted_alpha_beta_and_knee_and_both_regimes():
    text = "\n".join(explain_sweep(synthetic_sweep()))
    assert "alpha = 2 ms per step" in text and "beta = 20 µs per sample" in text
    assert "B* = alpha/beta = 100 samples" in text
    assert "batch 8-32: the fixed per-step cost is 93%-76% of each step" in text
    assert "batch 128-512: compute is 56%-84% of each step" in text
    assert "50,000 samples/s" in text  # 1 / beta
    assert "m0 = 700 MiB" in text and "m1 = 0.5 MiB per sample" in text
    assert "slower than" not in text  # no batch is slower here, so none is explained


def test_a_slower_big_batch_is_put_down_to_the_input_wait_the_data_show():
    # Batch 512 waits 30 ms per step for its input: its epoch is slower than batch 128's.
    text = "\n".join(explain_sweep(synthetic_sweep(wait={512: 0.03})))
    match = re.search(r"Batch 512 is slower than batch 128 \(steady epoch ([\d.]+) s vs ([\d.]+) s\): (.*)", text)
    assert match, text
    assert "it waited for input" in match.group(3)
    assert "per sample" not in match.group(3)  # its compute per sample did not change: not claimed
    # The steady epoch at 512: 8 steps of 12.24 ms compute, 30 ms input wait and 0.1 ms taking the batch.
    step, wait = ALPHA + BETA * 512, 0.03
    epoch = 8 * (step + wait + 1e-4)
    shares = f"{8 * step / epoch:.0%} step compute, {8 * wait / epoch:.0%} input wait"
    assert f"at batch 512: {epoch:.3g} s = {shares}" in text


def test_a_slower_epoch_from_a_few_slow_steps_is_said_to_be_in_the_spread():
    # 3 of batch 512's 8 steps take 5x as long: its median step is on the line, its epoch is not.
    text = "\n".join(explain_sweep(synthetic_sweep(slow={512: (3, 5.0)})))
    match = re.search(r"Batch 512 is slower than batch 128 .*?: (.*)", text)
    assert match and "spread of the step times" in match.group(1) and "input" not in match.group(1)


def test_accumulation_is_named_only_when_used():
    sweep = synthetic_sweep()
    assert "accumulation" not in "\n".join(explain_sweep(sweep))
    for run in sweep.ordered_runs():
        run.attrs["accumulation_steps"] = 4
    assert explain_sweep(sweep)[0].startswith("Gradient accumulation: each update sums 4 micro-batches")


def test_utilisation_is_reported_only_against_a_known_peak():
    sweep = synthetic_sweep()
    without = "\n".join(explain_sweep(sweep))
    assert "no matmul peak is measured" in without and "%" not in without.split("FLOPs:")[1].split("\n")[0]
    best = FLOPS * max(r.figures.samples_per_s for r in sweep.ordered_runs())
    with_peak = "\n".join(explain_sweep(sweep, peak_flops=10 * best))
    assert "10.0% at batch 512" in with_peak
    # A peak below what training achieved (measured on a busy machine) is no ceiling: no utilisation over 100%.
    too_low = "\n".join(explain_sweep(sweep, peak_flops=best / 2))
    assert "below what training achieved" in too_low and "Utilisation" not in too_low
    no_flops = "\n".join(explain_sweep(synthetic_sweep(flops=None), peak_flops=1e12))
    assert "does not record the model's FLOPs" in no_flops and "Utilisation" not in no_flops


def test_report_of_a_real_sweep_prints_alpha_beta_and_the_knee(tmp_path):
    out = tmp_path / "three.h5"
    args = [*TINY, "--batch-sizes", "8,32,128", "--samples", "512", "--epochs", "2", "--out", out, "--quiet"]
    sweep = batchlab("sweep", *args, env={"BATCHLAB_CACHE_DIR": str(tmp_path / "cache")})
    assert sweep.returncode == 0, sweep.stderr
    report = batchlab("report", out, env={"BATCHLAB_CACHE_DIR": str(tmp_path / "cache")})
    assert report.returncode == 0, report.stderr
    text = " ".join(report.stdout.split())  # paragraphs are wrapped
    fit = sweep_step_time(SweepData.from_file(out))
    match = re.search(r"alpha = (-?[\d.]+) (ms|µs|s) per step .*? beta = ([\d.e+-]+) (ms|µs|s) per sample", text)
    assert match, report.stdout
    scale = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}
    assert float(match.group(1)) * scale[match.group(2)] == pytest.approx(fit.alpha, rel=0.01)
    assert float(match.group(3)) * scale[match.group(4)] == pytest.approx(fit.beta, rel=0.01)
    if fit.alpha > 0 and fit.beta > 0:
        assert f"B* = alpha/beta = {fit.knee:.0f} samples" in text
    else:
        assert "no knee" in text
    assert "MFLOP per training sample" in text  # the child counted the model's FLOPs
    assert "no matmul peak is measured" in text  # an empty cache: no utilisation claimed


def test_one_time_costs_are_said_phase_by_phase_per_kind_of_child():
    # Run 0 in a fresh child, runs 1-3 in standby children that had started, imported and loaded ahead
    # (runs named by their index, as in the run file and the runs table).
    sweep = synthetic_sweep()
    phases = {"process": 0.3, "import": 2.9, "data": 0.2, "model": 0.4, "pipeline": 0.1}
    for run in sweep.ordered_runs():
        run.attrs.update({f"startup_{k}_s": v for k, v in phases.items()})
        fresh = run.index == 0
        run.attrs.update(
            child="fresh" if fresh else "standby",
            startup_prepared_s=0.0 if fresh else 3.4,
            startup_s=3.95 if fresh else 0.55,  # request -> first step begins
        )
    fresh = one_time_costs(sweep.runs[0])
    # the first step: 0.1 ms fetch + 0.8 s traced step; tracing = 0.8 s - the median untraced step at batch 8
    assert fresh.paid == pytest.approx(3.95 + 0.8001)
    assert fresh.tracing == pytest.approx(0.8 - (ALPHA + BETA * 8))
    assert fresh.rest == pytest.approx(fresh.paid - 3.9 - fresh.tracing)
    standby = one_time_costs(sweep.runs[3])
    assert standby.ahead == pytest.approx(3.4) and standby.rest == pytest.approx(1.3501 - 0.5 - standby.tracing)
    text = "\n".join(explain_sweep(sweep))
    assert (
        "Before its first step ended, run 0 (a fresh child, started when its run was asked for) paid 4.8 s: "
        "process start 0.3 s, TensorFlow import 2.9 s, data 0.2 s, model build 0.4 s, input pipeline 0.1 s, "
        "tracing 0.8 s, the rest 0.052 s." in text
    )
    assert "runs 1, 2, 3 (a standby child, started ahead" in text
    assert (
        "paid 1.4 s (median): model build 0.4 s, input pipeline 0.1 s, tracing 0.8 s, the rest 0.055 s; its "
        "process start 0.3 s, TensorFlow import 2.9 s, data 0.2 s (3.4 s of them ahead of the request)" in text
    )
    assert "gaps between runs" not in text
    # a standby still importing when asked for: what it made the run wait is said
    for run in sweep.ordered_runs()[1:]:
        run.attrs["startup_prepared_s"] = 2.4
    assert "waiting for the standby to finish its start-up 1.0 s" in "\n".join(explain_sweep(sweep))


def test_a_tracing_cost_that_rounds_to_one_value_is_said_once_not_as_a_range():
    # batch 8 and 32 trace for 0.798 and 0.797 s: both "0.8" at two digits, so not "0.8-0.8 s"
    text = "\n".join(explain_sweep(synthetic_sweep(sizes=(8, 32))))
    assert "the step function cost 0.8 s per run" in text and "0.8-0.8" not in text
