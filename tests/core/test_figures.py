"""Figures of a running epoch (core/figures.py): the live window's provisional points."""

import numpy as np
import pytest
from batchlab.core.figures import running_epoch, steady_throughput


def test_running_epoch_known_answer_and_none_once_its_row_came():
    steps = {
        "step": np.arange(5),
        "epoch": np.array([0, 0, 1, 1, 1]),
        "loss": np.array([9.0, 9.0, 1.0, 2.0, 4.0]),
        "batch_size": np.array([10, 10, 10, 10, 5]),
        "wall_time": np.array([0.1, 0.2, 0.6, 0.7, 0.9]),
        "fetch_time": np.array([0.0, 0.0, 0.05, 0.0, 0.0]),
        "step_time": np.array([0.1, 0.1, 0.05, 0.1, 0.2]),
    }
    epochs = {"epoch": np.array([0]), "wall_time": np.array([0.3]), "train_loss": np.array([9.0])}
    r = running_epoch(steps, epochs)
    assert (r.epoch, r.steps) == (1, 3)
    assert r.train_loss == pytest.approx((10 * 1 + 10 * 2 + 5 * 4) / 25)  # sample-weighted, not 7/3
    assert r.samples_per_s == pytest.approx(25 / (0.1 + 0.1 + 0.2))  # first step: its fetch + step time
    no_fetch = {k: v for k, v in steps.items() if k not in ("fetch_time", "step_time")}
    assert running_epoch(no_fetch, epochs).samples_per_s == pytest.approx(25 / (0.3 + 0.1 + 0.2))  # from epoch 0's end
    ended = {"epoch": np.array([0, 1]), "wall_time": np.array([0.3, 0.9]), "train_loss": np.array([9.0, 2.0])}
    assert running_epoch(steps, ended) is None
    assert running_epoch({k: v[:0] for k, v in steps.items()}, {}) is None


def test_evaluation_points_for_a_loss_plot_and_the_row_that_met_the_target():
    from batchlab.core.figures import evaluation_points

    evals = {
        "steps": np.array([100, 200, 300, 400]),
        "examples": np.array([800, 1600, 2400, 3200]),
        "wall_time": np.array([1.0, 2.5, 4.0, 5.5]),
        "train_loss": np.array([0.9, 0.5, 0.3, 0.2]),
        "val_loss": np.array([1.0, 0.6, 0.35, 0.25]),
        "val_accuracy": np.array([0.9, 0.98, 0.985, 0.99]),  # equal to the target is not met (strictly better)
    }
    p = evaluation_points(evals, {"target": "val_accuracy=0.98"})
    assert p.metric == "val_loss" and p.values.tolist() == [1.0, 0.6, 0.35, 0.25]
    assert p.steps.tolist() == [100, 200, 300, 400] and p.examples.tolist() == [800, 1600, 2400, 3200]
    assert p.met_row == 2 and p.met_text == "met val_accuracy>0.98 at step 300"
    # a train-loss target is drawn as what it is compared with; a big step count gets thousands separators
    q = evaluation_points({**evals, "steps": evals["steps"] * 10}, {"target": "train_loss=0.4"})
    assert q.metric == "train_loss" and q.met_row == 2 and q.met_text == "met train_loss<0.4 at step 3,000"
    # not reached, no target, no validation (val_loss NaN: the train loss), no evaluations
    assert evaluation_points(evals, {"target": "val_loss=0.1"}).met_row is None
    assert evaluation_points(evals, {}).met_text == "" and evaluation_points(evals, {}).metric == "val_loss"
    no_val = {**evals, "val_loss": np.full(4, np.nan)}
    assert evaluation_points(no_val, {}).metric == "train_loss"
    assert evaluation_points({k: v[:0] for k, v in evals.items()}, {"target": "val_loss=0.1"}) is None


def test_running_epoch_time_split_and_the_rows_it_needs():
    from batchlab.core.figures import running_epoch_rows

    steps = {
        "step": np.arange(6),
        "epoch": np.array([0, 0, 0, 1, 1, 1]),
        "loss": np.ones(6),
        "batch_size": np.full(6, 10),
        "wall_time": np.array([0.1, 0.2, 0.3, 0.8, 1.0, 1.3]),
        "fetch_time": np.array([0.0, 0.0, 0.0, 0.1, 0.02, 0.05]),
        "step_time": np.array([0.1, 0.1, 0.1, 0.1, 0.15, 0.2]),
        "input_wait": np.array([0.0, 0.0, 0.0, 0.08, 0.01, 0.0]),
    }
    epochs = {"epoch": np.array([0]), "wall_time": np.array([0.5])}
    r = running_epoch(steps, epochs)
    assert r.elapsed_s == pytest.approx(0.2 + 0.2 + 0.3)  # own fetch + step, then the gaps
    assert r.compute_s == pytest.approx(0.45) and r.input_wait_s == pytest.approx(0.09)
    start = running_epoch_rows(steps["epoch"])
    assert start == 2  # the last step of epoch 0, then the running epoch
    sliced = running_epoch({k: v[start:] for k, v in steps.items()}, epochs)
    assert sliced == r  # the same figures from the running epoch's rows alone
    assert running_epoch_rows(np.array([0, 0, 0])) == 0 and running_epoch_rows(np.array([], dtype=int)) == 0


def test_run_ended_carries_the_steady_throughput_the_views_show():
    """The parent replaces the child's own figure with core.figures' steady throughput of the steps it forwarded,
    so the run file's samples_per_s attribute is the runs table's number (traced first step left out)."""
    from batchlab.core.sweep.run_end_figures import RunEndFigures

    steps = {
        "step": [0, 1, 2, 3],
        "epoch": [0, 0, 1, 1],
        "wall_time": [0.5, 0.6, 0.8, 0.9],
        "fetch_time": [0.01] * 4,
        "step_time": [0.4, 0.09, 0.09, 0.09],
        "batch_size": [8] * 4,
        "traced": [1, 0, 0, 0],
    }
    run_end = RunEndFigures()
    run_end({"type": "steps", "run": 0, **{k: v[:2] for k, v in steps.items()}})
    run_end({"type": "epoch_ended", "run": 0, "epoch": 0, "wall_time": 0.7})
    run_end({"type": "steps", "run": 0, **{k: v[2:] for k, v in steps.items()}})
    ended = {"type": "run_ended", "run": 0, "samples_per_s": 1.0}  # the child's own figure
    run_end(ended)
    # untraced steps: 0.1 s (gap), 0.1 s (fetch + step of epoch 1's first), 0.1 s (gap): 24 samples in 0.3 s
    assert ended["samples_per_s"] == pytest.approx(80.0)
    table = {k: np.asarray(v) for k, v in steps.items()}
    assert ended["samples_per_s"] == pytest.approx(
        steady_throughput(table, {"epoch": np.array([0]), "wall_time": np.array([0.7])})
    )
