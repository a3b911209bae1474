"""Figures of a running epoch (core/figures.py): the live window's provisional points."""

import numpy as np
import pytest
from batchlab.core.figures import running_epoch


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
