"""The setup panel's learning-rate preview (issue 9 item 8): one curve per batch size with the rates the
runs will apply, decimated per pixel column for long budgets. No training."""

from __future__ import annotations

import numpy as np
import pytest
from batchlab.core.spec import build_spec
from batchlab.gui.lr_preview import column_envelope, log_spaced

from tests.gui.panels import shown_panel

# batch 16: 16 steps an epoch, B0 = 16 so its peak is lr0; batch 64: 4 steps an epoch, peak 0.1 x 64/16 = 0.4
LSR = {
    "preset": "mnist-mlp",
    "samples": "256",
    "val_samples": "64",
    "batch_sizes": "16, 64",
    "epochs": "2",
    "optimizer": "sgd",
    "lr": "0.1",
    "lr_rule": "linear",
    "warmup": "4",
    "warmup_unit": "steps",
    "lr_schedule": "step",
    "lr_decay_factor": "0.5",
    "lr_decay_every": "1",
}


@pytest.fixture
def panel(qtbot, tmp_path):
    p = shown_panel(qtbot, tmp_path, height=800, values=None)
    p.convergence.set_expanded(True)
    return p


def curve_points(panel, batch):
    curve = panel.preview.curves[batch]
    return dict(zip(curve.xData.astype(int).tolist(), curve.yData.tolist(), strict=True))


def test_one_curve_per_batch_size_with_the_rate_of_each_step(panel):
    panel.set_values(LSR)
    panel.preview.update_now()
    assert sorted(panel.preview.curves) == [16, 64]
    b16, b64 = curve_points(panel, 16), curve_points(panel, 64)
    assert len(b16) == 32 and len(b64) == 8  # 2 epochs of 16 and of 4 steps, drawn whole
    # batch 16: no warmup above lr0, halved after each 16-step epoch
    assert (b16[0], b16[15], b16[16], b16[31]) == pytest.approx((0.1, 0.1, 0.05, 0.05))
    # batch 64: warmup 0.1 -> 0.4 over 4 steps (0.1 + 0.3 s/4), then 0.4 x 0.5 ** (s // 4)
    assert [b64[s] for s in range(8)] == pytest.approx([0.1, 0.175, 0.25, 0.325, 0.2, 0.2, 0.2, 0.2])
    assert panel.preview.plot.getPlotItem().legend.isVisible()
    # a change of the fields is drawn after the debounce; a batch size taken out loses its curve
    panel.set_values({**LSR, "batch_sizes": "64"})
    panel.preview.update_now()
    assert sorted(panel.preview.curves) == [64]
    # an invalid field: no curves, and the note says why
    panel.set_values({**LSR, "lr_decay_factor": "2"})
    panel.preview.update_now()
    assert panel.preview.curves == {} and "lr_decay_factor" in panel.preview.note.text()


def test_a_100k_step_budget_is_drawn_with_two_points_per_pixel_column(panel):
    panel.set_values({"preset": "mnist-cnn-98", "lr_schedule": "cosine"})  # batch 1: 100,000 steps
    panel.preview.update_now()
    columns = panel.preview.columns()
    spec = build_spec(panel.values())
    for batch in spec.batch_sizes:
        curve = panel.preview.curves[batch]
        whole = panel.preview.rates[batch]
        assert len(whole) == spec.budget.steps(spec.samples, batch)
        assert len(curve.xData) <= 2 * columns
        assert curve.yData.max() == whole.max() and curve.yData.min() == whole.min()


def test_column_envelope_keeps_each_columns_extremes_at_their_steps():
    rng = np.random.default_rng(0)
    values = rng.normal(size=100_003)
    index, y = column_envelope(values, 200)
    assert len(index) <= 400 and np.all(np.diff(index) >= 0)
    assert np.array_equal(y, values[index])
    width = int(np.ceil(len(values) / 200))
    for column in (0, 57, len(values) // width):  # the last, short column too
        part = values[column * width : (column + 1) * width]
        assert part.min() in y and part.max() in y
    short = np.arange(10.0)
    assert np.array_equal(column_envelope(short, 200)[1], short)
    # on a log step axis the first steps (a warmup) are all there, still with every column's extremes
    log_index, log_y = log_spaced(values, 200)
    assert len(log_index) <= 800 and set(range(8)) <= set(log_index.tolist()) and set(index) <= set(log_index)
    assert np.array_equal(log_y, values[log_index])


def test_a_batch_size_schedule_is_drawn_under_the_rates(panel):
    """The hook for batch-size schedules: a source of each step's batch size adds a linked plot under the rates."""
    preview = panel.preview
    assert not preview.batch_plot.isVisible()  # no batch source: a fixed batch needs no plot

    def doubling(spec):  # a stand-in for the batch-size schedules' own math: the batch doubles after epoch 1
        return {b: [b] * 16 + [2 * b] * 16 for b in spec.batch_sizes}

    preview.batch_source = doubling
    panel.set_values(LSR)
    preview.update_now()
    assert preview.batch_plot.isVisible() and sorted(preview.batch_curves) == [16, 64]
    curve = preview.batch_curves[64]
    assert dict(zip(curve.xData.astype(int).tolist(), curve.yData.tolist(), strict=True))[20] == 128


def test_a_growing_batch_is_drawn_from_the_schedules_own_steps(panel):
    panel.set_values({**LSR, "lr_rule": "constant", "warmup": "0", "lr_schedule": "constant", "batch_schedule": "grow"})
    panel.set_values({"batch_growth_factor": "2", "batch_growth_every": "1"})
    panel.preview.update_now()
    assert panel.preview.batch_plot.isVisible()
    curve = panel.preview.batch_curves[16]  # epoch 0: 16 steps of 16; epoch 1: the batch doubled, 8 steps of 32
    assert curve.yData.tolist() == [16.0] * 16 + [32.0] * 8
    panel.preview.x_axis.setCurrentIndex(panel.preview.x_axis.findData("epoch"))
    x = panel.preview.batch_curves[16].xData  # examples seen / samples: epoch 1 starts at step 16, ends at 2
    assert (x[0], x[16], x[23]) == pytest.approx((0.0, 1.0, 1 + 7 / 8))
