"""Scaling efficiency of data-parallel runs (issue 27 item 4) against a hand computation, on synthetic runs."""

import math

import numpy as np
import pytest
from batchlab.core.analysis.claims import ClaimError
from batchlab.core.analysis.scaling import STRONG, WEAK, scaling_lines, scaling_points, scaling_rows
from batchlab.core.events import make_event
from batchlab.core.model import SweepData

from tests.core.analysis_sweeps import steps_event

STEPS = 40


def _sweep(runs):
    """runs: (replicas, global batch, seed, step time s); every step of a run takes the same time, one traced."""
    data = SweepData()
    data.handle(make_event("sweep_started", spec={}, runs=[], environment={"device_description": "cpu: test"}))
    for index, (replicas, batch, seed, step) in enumerate(runs):
        extra = {} if replicas is None else {"replicas": replicas, "per_replica_batch": batch // replicas}
        data.handle(make_event("run_started", run=index, batch_size=batch, seed=seed, samples=10_000, **extra))
        times = np.full(STEPS, step)
        times[0] = 0.5  # traced: left out of the steady figures
        data.handle(steps_event(index, batch, np.linspace(1, 0.5, STEPS), times, [1] + [0] * (STEPS - 1)))
        data.handle(make_event("run_ended", run=index, status="ok", message="", total_time=float(times.sum())))
    return data


def test_weak_and_strong_scaling_against_a_hand_computation():
    # weak: per-replica batch 64 on 1, 2, 4 replicas; steps of 10, 11, 12.5 ms; strong: global 256 on 1 and 4
    data = _sweep(
        [
            (None, 64, 0, 0.010),  # a run from before data parallelism: one replica
            (2, 128, 0, 0.011),
            (4, 256, 0, 0.0125),
            (1, 256, 0, 0.032),
        ]
    )
    points = scaling_points(data.ordered_runs())
    assert [(p.replicas, p.global_batch, p.per_replica_batch) for p in points] == [
        (1, 64, 64),
        (1, 256, 256),
        (2, 128, 64),
        (4, 256, 64),
    ]
    throughput = {p.global_batch * 10 + p.replicas: p.samples_per_s for p in points}
    # steady throughput = samples / steady step time (the figures' own rule; compared, not assumed)
    assert throughput[641] == pytest.approx(64 / 0.010, rel=0.02)
    weak = scaling_rows(points, WEAK)
    assert [(r.batch, r.replicas) for r in weak] == [(64, 2), (64, 4)]
    four = weak[1]
    hand_speedup = (256 / 0.0125) / (64 / 0.010)  # 3.2
    assert four.speedup == pytest.approx(hand_speedup, rel=0.02)
    assert four.efficiency == pytest.approx(hand_speedup / 4, rel=0.02)  # 80%
    assert four.sync_per_step == pytest.approx(0.0025, rel=0.05)
    text = four.text()
    assert text.startswith("4 replicas at per-replica batch 64: 3.2x the throughput of one (80% efficient)")
    assert "a step took 2.5 ms longer than one replica's" in text
    strong = scaling_rows(points, STRONG)
    assert [(r.batch, r.replicas) for r in strong] == [(256, 4)]
    assert strong[0].speedup == pytest.approx(0.032 / 0.0125, rel=0.02)  # 2.56x
    assert strong[0].efficiency == pytest.approx(0.64, rel=0.02)
    assert math.isnan(strong[0].sync_per_step)  # not defined when each replica's share changes
    assert "longer than one replica's" not in strong[0].text()
    lines = scaling_lines(data.ordered_runs())
    assert len(lines) == 3 and "global batch 256" in lines[2]


def test_a_slowdown_and_more_than_linear_are_worded_as_such():
    slow = scaling_rows(scaling_points(_sweep([(1, 64, 0, 0.01), (2, 128, 0, 0.04)]).ordered_runs()), WEAK)[0]
    assert slow.speedup == pytest.approx(0.5, rel=0.02)
    assert "2x less throughput than one (a slowdown; 25% efficient)" in slow.text()
    fast = scaling_rows(scaling_points(_sweep([(1, 64, 0, 0.01), (2, 128, 0, 0.009)]).ordered_runs()), WEAK)[0]
    assert "more than linear" in fast.text() and "no longer than one replica's" in fast.text()


def test_seeds_are_averaged_and_runs_without_a_baseline_say_what_to_add():
    data = _sweep([(1, 64, 0, 0.010), (1, 64, 1, 0.012), (2, 128, 0, 0.011), (2, 128, 1, 0.013)])
    points = scaling_points(data.ordered_runs())
    assert [p.runs for p in points] == [2, 2]
    mean_one = (64 / 0.010 + 64 / 0.012) / 2
    assert points[0].samples_per_s == pytest.approx(mean_one, rel=0.02)
    assert scaling_lines(_sweep([(1, 64, 0, 0.01)]).ordered_runs()) == []  # one replica only: nothing to say
    orphan = scaling_lines(_sweep([(2, 128, 0, 0.01)]).ordered_runs())
    assert len(orphan) == 1 and "add replicas 1" in orphan[0] and "on 2 replicas" in orphan[0]


def test_a_claim_without_a_throughput_refuses_to_be_worded():
    row = scaling_rows(scaling_points(_sweep([(1, 64, 0, 0.01), (2, 128, 0, 0.01)]).ordered_runs()), WEAK)[0]
    broken = type(row)(row.kind, row.batch, type(row.point)(2, 128, math.nan, 0.01, math.nan, 1), row.baseline)
    with pytest.raises(ClaimError):
        broken.text()


def test_the_explanation_compares_a_sweep_with_other_replicas_files():
    """report --scaling-with and the window's comparison: explain_sweep's `others` enter its scaling lines only."""
    from batchlab.core.analysis.explain import explain_sweep

    two = _sweep([(2, 128, 0, 0.016)])  # 8,000 samples/s against one replica's 6,400: 1.25x, 62% efficient
    one = _sweep([(1, 128, 0, 0.020)])
    alone = [p for p in explain_sweep(two) if p.startswith("Scaling:")]
    assert len(alone) == 1 and "--scaling-with" in alone[0]
    paragraphs = explain_sweep(two, others=[one])
    expected = scaling_lines([*two.ordered_runs(), *one.ordered_runs()])
    assert expected == ["2 replicas at global batch 128: 1.2x the throughput of one (62% efficient)"]
    assert [p for p in paragraphs if "replicas at" in p] == expected
    assert not any(p.startswith("Scaling:") for p in paragraphs)
    assert not any("replica" in p for p in explain_sweep(one))  # one replica alone: nothing about scaling


def test_a_ratio_near_one_keeps_a_third_digit():
    """A 4% slowdown reads "1.04x less", not "1x less" beside an efficiency of 48%."""
    lines = scaling_lines(_sweep([(1, 64, 0, 0.010), (2, 128, 0, 0.0208)]).ordered_runs())
    assert lines[0].startswith("2 replicas at per-replica batch 64: 1.04x less throughput than one (a slowdown; 48%")


def test_logical_cpu_replicas_are_said_to_share_the_cores():
    """On logical CPU devices the longer step includes the replicas competing for the cores; the line says so."""
    data = _sweep([(1, 64, 0, 0.010), (2, 128, 0, 0.0125)])
    for run in data.ordered_runs():
        run.attrs["device"] = "cpu"
    line = scaling_lines(data.ordered_runs())[0]
    assert "a step took 2.5 ms longer than one replica's (logical CPU devices: the replicas share" in line
    assert "all-reduce and the replicas' waits" not in line
