"""The gradient noise scale: the estimator's math (numpy, known answers), the measurement through the
trainer's own code (a fresh Python: this test process never imports TensorFlow), and a sweep's file."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from batchlab.core.analysis.noise_scale import (
    NoiseScaleEMA,
    describe_cost,
    describe_series,
    noise_scale_cost,
    noise_scale_series,
    unbiased_estimates,
)
from batchlab.core.errors import SpecError
from batchlab.core.spec import build_spec

# ---------------------------------------------------------------------- the estimator's math


def test_unbiased_estimates_recover_both_parts_from_exact_expected_norms():
    """E|G_B|^2 = |G|^2 + tr(Sigma) / B: fed the exact expectations at B_s = 16 and B_b = 64, the two
    estimates give back |G|^2 = 3 and tr(Sigma) = 960 (B_simple = 320)."""
    g2, trace = 3.0, 960.0
    g2_est, trace_est = unbiased_estimates(g2 + trace / 16, g2 + trace / 64, 16, 64)
    assert g2_est == pytest.approx(3.0, rel=1e-12) and trace_est == pytest.approx(960.0, rel=1e-12)
    with pytest.raises(ValueError):
        unbiased_estimates(1.0, 1.0, 64, 64)


def test_moving_averages_are_bias_corrected_separate_and_divided_at_the_end():
    ema = NoiseScaleEMA(beta=0.9)
    assert ema.update(2.0, 100.0) == pytest.approx((2.0, 100.0, 50.0))  # no pull towards 0 at the start
    # the ratio of the averages, not the average of the ratios: (0.9*0.1*2 + 0.1*(-1)) ... bias-corrected
    g2, trace, b = ema.update(-1.0, 300.0)
    w_old, w_new = 0.9 * 0.1 / (1 - 0.81), 0.1 / (1 - 0.81)
    assert g2 == pytest.approx(w_old * 2 - w_new) and trace == pytest.approx(w_old * 100 + w_new * 300)
    assert b == pytest.approx(trace / g2)
    assert ema.update(math.nan, 5.0)[:2] == pytest.approx((g2, trace))  # a diverged measurement is skipped
    low = NoiseScaleEMA()
    assert math.isnan(low.update(-0.5, 10.0)[2])  # |G|^2 <= 0: no signal above the noise, no B_simple


def _table(g2, trace, measure_time=None, step_time=None, traced=None):
    n = len(g2)
    ema = NoiseScaleEMA()
    b = [ema.update(a, t)[2] for a, t in zip(g2, trace, strict=True)]
    return {
        "step": np.arange(n) * 10,
        "g2_est": np.asarray(g2, dtype=float),
        "trace_est": np.asarray(trace, dtype=float),
        "b_simple": np.asarray(b),
        "measure_time": np.asarray(measure_time if measure_time is not None else [0.02] * n),
        "step_time": np.asarray(step_time if step_time is not None else [0.01] * n),
        "traced": np.asarray(traced if traced is not None else [0] * n),
    }


def test_series_gives_the_final_value_and_a_spread_over_the_last_window():
    rng = np.random.default_rng(3)
    g2 = 2.0 + rng.normal(0, 0.2, 60)
    trace = 2000.0 + rng.normal(0, 200, 60)  # B_simple ~ 1000
    series = noise_scale_series(_table(g2, trace))
    assert series.measurements == 60 and series.window == 19  # (1 + 0.9) / (1 - 0.9)
    assert series.final == pytest.approx(series.b_simple[-1])
    assert 900 < series.final < 1100
    assert series.low < 1000 < series.high and series.high - series.low < 200
    text = describe_series(series)
    assert text.startswith(f"predicted critical batch ~ {series.final:,.0f} (B_simple, a prediction")
    assert noise_scale_series({"step": np.array([], dtype=int)}) is None
    flat = noise_scale_series(_table([-1.0, -2.0], [5.0, 6.0]))
    assert math.isnan(flat.final) and "not measurable" in describe_series(flat)


def test_cost_is_a_measured_step_against_an_ordinary_one_leaving_out_tracing():
    table = _table([1.0] * 3, [1.0] * 3, measure_time=[5.0, 0.016, 0.018], step_time=[0.3, 0.01, 0.01])
    table["traced"] = np.array([1, 0, 0])
    cost = noise_scale_cost(table, ordinary_step_time=0.01, every=20)
    assert cost.ratio == pytest.approx(2.7)  # median of 0.026 and 0.028 over 0.01
    assert cost.extra_fraction == pytest.approx(0.017 / 0.2)
    assert describe_cost(cost).startswith("measured steps 2.7x an ordinary step (every 20 steps: +8% training time")
    assert noise_scale_cost(table, ordinary_step_time=math.nan, every=20) is None


# ---------------------------------------------------------------------- the spec


def test_it_is_off_by_default_and_given_per_sweep():
    assert build_spec({}).noise_scale_every is None
    spec = build_spec({"noise_scale_every": "20", "noise_scale_parts": "8", "batch_sizes": "8,64"})
    assert (spec.noise_scale_every, spec.noise_scale_parts) == (20, 8)
    assert build_spec(spec.to_dict()) == spec


@pytest.mark.parametrize(
    "values, field, phrase",
    [
        ({"noise_scale_every": "0"}, "noise_scale_every", "whole number >= 1"),
        ({"noise_scale_every": "10", "loop": "fit"}, "noise_scale_every", "the fit engine cannot"),
        ({"noise_scale_parts": "1"}, "noise_scale_parts", "from 2 to 64"),
        ({"noise_scale_every": "5", "batch_sizes": "2,64"}, "noise_scale_parts", "batch size 2 is smaller"),
        ({"noise_scale_every": "5", "batch_sizes": "1,64"}, "noise_scale_parts", "batch of 1"),
    ],
)
def test_bad_settings_are_one_line_naming_the_field(values, field, phrase):
    with pytest.raises(SpecError) as e:
        build_spec(values)
    assert e.value.field == field and phrase in str(e.value) and "\n" not in str(e.value)


# ---------------------------------------------------------------------- through the trainer's code (TensorFlow)

SCRIPT = r"""
import os, json, math
os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, keras, tensorflow as tf
from batchlab.core.analysis.noise_scale import noise_scale_series
from batchlab.core.spec import RunSpec, build_spec
from batchlab.core.training.hooks import HookList, StepLog
from batchlab.core.training.noise_scale import NoiseScaleProbe
from batchlab.core.training.trainer import InstrumentedLoop, RunSetup

out = {}

# (b) linear regression with a closed form (see the test's docstring)
D, NOISE, N, B, K, M = 8, 1.0, 100_000, 256, 4, 400
rng = np.random.default_rng(0)
x = rng.normal(size=(N, D)).astype("float32")
w_star = rng.normal(size=D)
delta = rng.normal(size=D)
delta *= 2.0 / np.linalg.norm(delta)  # |w - w*| = 2
y = (x @ w_star + rng.normal(scale=NOISE, size=N)).astype("float32")[:, None]
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((D,)), keras.layers.Dense(1, use_bias=False)])
model.compile(optimizer="sgd", loss="mse")
model.set_weights([(w_star + delta).astype("float32")[:, None]])
probe = NoiseScaleProbe(model, parts=K, every=1, run_index=0, emit=lambda e: None)
rows = []
for m in range(M):
    idx = rng.choice(N, B, replace=False)
    row = probe.measure(m, tf.constant(x[idx]), tf.constant(y[idx]))
    probe.record(row)
    rows.append(row)
table = {k: np.array([r[k] for r in rows]) for k in ("step", "g2_est", "trace_est", "b_simple")}
out["linear"] = {
    "g2": float(table["g2_est"].mean()),
    "trace": float(table["trace_est"].mean()),
    "final": noise_scale_series(table).final,
    "b_small": rows[0]["small_batch"], "b_big": rows[0]["big_batch"],
    "weights_unchanged": bool(np.array_equal(model.get_weights()[0], (w_star + delta).astype("float32")[:, None])),
}

# the micro-batch gradients' mean is the ordinary (whole-batch) gradient, regularisation included
keras.utils.set_random_seed(1)
mlp = keras.Sequential([
    keras.Input((6,)),
    keras.layers.Dense(16, activation="tanh", kernel_regularizer=keras.regularizers.L2(1e-3)),
    keras.layers.Dense(3, activation="softmax"),
])
mlp.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
xb = tf.constant(rng.normal(size=(64, 6)).astype("float32"))
yb = tf.constant(rng.integers(0, 3, size=64))
probe = NoiseScaleProbe(mlp, parts=4, every=1, run_index=0, emit=lambda e: None)
_, big_sq, mean = probe.function(xb, yb)
with tf.GradientTape() as tape:
    loss = mlp.compute_loss(x=xb, y=yb, y_pred=mlp(xb, training=True), training=True)
ordinary = tape.gradient(loss, mlp.trainable_weights)
# with mixed precision's loss-scaling optimizer the loss scale (2**15 here) is divided out again
scaled = keras.models.clone_model(mlp)
scaled.set_weights(mlp.get_weights())
scaled.compile(optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD()), loss=mlp.loss)
_, scaled_big_sq, _ = NoiseScaleProbe(scaled, 4, 1, 0, lambda e: None).function(xb, yb)
out["mean_gradient"] = {
    "max_diff": max(float(np.abs(a - b).max()) for a, b in zip(mean, ordinary)),
    "scale": max(float(np.abs(b).max()) for b in ordinary),
    "big_sq": float(big_sq),
    "ordinary_sq": float(sum(float(tf.reduce_sum(g * g)) for g in ordinary)),
    "loss_scaled_big_sq": float(scaled_big_sq),
}

# the measurement leaves the trajectory as it was: batch statistics and dropout included
def train(noise_every):
    keras.utils.set_random_seed(2)
    inputs = keras.Input((6,))
    h = keras.layers.Dense(16)(inputs)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.Dropout(0.3)(keras.layers.Activation("relu")(h))
    net = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(h))
    net.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    spec = build_spec({"preset": "mnist-mlp", "samples": 128, "val_samples": 0, "batch_sizes": "32", "epochs": 2})
    xs = np.random.default_rng(5).normal(size=(128, 6)).astype("float32")
    ys = np.random.default_rng(6).integers(0, 3, size=128)
    events = []
    setup = RunSetup(RunSpec(0, 32, 0, spec), net, xs, ys, None, None)
    noise = NoiseScaleProbe(net, 4, noise_every, 0, events.append) if noise_every else None
    hooks = HookList([StepLog(0, events.append)] + ([noise] if noise else []))
    loop = InstrumentedLoop(setup, hooks, lambda: False, noise=noise)
    loop.train(2)
    hooks.on_run_end({})
    losses = [l for e in events if e["type"] == "steps" for l in e["loss"]]
    measured = [s for e in events if e["type"] == "noise_scale" for s in e["step"]]
    return net, losses, measured, loop.run_fields()

plain, plain_losses, _, _ = train(0)
measured, measured_losses, steps, fields = train(3)
out["trajectory"] = {
    "max_weight_diff": max(float(np.abs(a - b).max()) for a, b in zip(plain.get_weights(), measured.get_weights())),
    "same_variables": all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(plain.variables, measured.variables)),
    "losses_equal": plain_losses == measured_losses and len(plain_losses) == 8,
    "measured_steps": [int(s) for s in steps],
    "fields": fields,
}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def measured():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_linear_regression_noise_scale_lands_within_10_percent_of_the_closed_form(measured):
    """y = x.w* + e, x ~ N(0, I_d), e ~ N(0, s^2), MSE loss, measured at fixed weights w = w* + delta.

    The per-sample loss is (x.w - y)^2 = (x.delta - e)^2, its gradient g = 2 x (x.delta - e). Over the data:
      G = E[g] = 2 (E[x x^T] delta - E[x e]) = 2 delta,  so |G|^2 = 4 |delta|^2;
      E|g|^2 = 4 E[|x|^2 (x.delta)^2] + 4 E[|x|^2] s^2 = 4 (d + 2) |delta|^2 + 4 d s^2
        (Gaussian moments: E[x_j^2 (x.delta)^2] = |delta|^2 + 2 delta_j^2; the cross term has E[e] = 0),
      tr(Sigma) = E|g|^2 - |G|^2 = 4 ((d + 1) |delta|^2 + d s^2),
      B_simple = tr(Sigma) / |G|^2 = (d + 1) + d s^2 / |delta|^2.
    With d = 8, s = 1, |delta| = 2: |G|^2 = 16, tr(Sigma) = 176, B_simple = 11. The probe the trainer uses
    measures 400 random batches of 256 (4 micro-batches of 64) from 100,000 samples, seeds fixed; the
    estimates' sampling error is about 2% (one standard deviation, checked over 20 seeds in numpy).
    """
    lin = measured["linear"]
    assert (lin["b_small"], lin["b_big"]) == (64, 256)
    assert lin["g2"] == pytest.approx(16.0, rel=0.10)
    assert lin["trace"] == pytest.approx(176.0, rel=0.10)
    assert lin["trace"] / lin["g2"] == pytest.approx(11.0, rel=0.10)
    assert lin["final"] == pytest.approx(11.0, rel=0.25)  # the moving average's last value: about 19 measurements
    assert lin["weights_unchanged"]  # measuring applies no update


def test_the_micro_batch_gradients_mean_is_the_ordinary_gradient(measured):
    m = measured["mean_gradient"]
    assert m["scale"] > 1e-3  # a real gradient, so equality means something
    assert m["max_diff"] < 1e-6 * max(1.0, m["scale"])
    assert m["big_sq"] == pytest.approx(m["ordinary_sq"], rel=1e-5)
    assert m["loss_scaled_big_sq"] == pytest.approx(m["big_sq"], rel=1e-5)


def test_measuring_leaves_the_training_trajectory_as_it_was(measured):
    t = measured["trajectory"]
    assert t["measured_steps"] == [0, 3, 6]  # every 3 steps over 2 epochs of 4
    assert t["losses_equal"]
    assert t["max_weight_diff"] == 0.0 and t["same_variables"]  # BatchNorm statistics and dropout seeds too
    assert (t["fields"]["noise_scale_every"], t["fields"]["noise_scale_parts"]) == (3, 4)


# ---------------------------------------------------------------------- predict, then verify (numpy)

ALPHA, BETA = 2e-3, 25e-6  # s, s per sample: as tests/core/analysis_sweeps.py, whose sweep has Bcrit = 64


def profile_sweep(sizes=(16, 64, 256), b_simple=64.0, steps=40):
    """A profile's runs: steady steps of ALPHA + BETA*B s and noise-scale rows with tr(Sigma)/|G|^2 = b_simple."""
    from batchlab.core.events import make_event
    from batchlab.core.model import SweepData

    data = SweepData()
    data.handle(make_event("sweep_started", spec={}, runs=[], environment={}))
    for index, b in enumerate(sizes):
        data.handle(make_event("run_started", run=index, batch_size=b, seed=0, samples=10_000, noise_scale_every=5))
        step_time = np.full(steps, ALPHA + BETA * b)
        data.handle(
            make_event(
                "steps",
                run=index,
                step=list(range(steps)),
                epoch=[0] * steps,
                loss=[1.0] * steps,
                batch_size=[b] * steps,
                step_time=step_time.tolist(),
                fetch_time=[0.0] * steps,
                traced=[0] * steps,
                wall_time=np.cumsum(step_time).tolist(),
            )
        )
        table = _table([2.0] * 8, [2.0 * b_simple] * 8)
        data.handle(make_event("noise_scale", run=index, **{k: v.tolist() for k, v in table.items()}))
    return data


def test_a_profile_predicts_relative_time_to_target_and_the_best_batch():
    """T(B) = Smin (1 + Bcrit/B)(alpha + beta B) is smallest at sqrt(Bcrit alpha / beta) = sqrt(64 x 80) = 71.6."""
    from batchlab.core.analysis.predict import describe_prediction, predict_from_profile, relative_time

    p = predict_from_profile(profile_sweep())
    assert p.b_simple == pytest.approx(64.0)
    assert (p.step_time.alpha, p.step_time.beta) == (pytest.approx(ALPHA, rel=1e-6), pytest.approx(BETA, rel=1e-6))
    assert p.best_batch == pytest.approx(math.sqrt(64 * ALPHA / BETA), rel=1e-6) and p.best_power_of_two == 64
    assert p.batch_sizes == (4, 8, 16, 32, 64, 128, 256, 512, 1024)
    rel = dict(zip(p.batch_sizes, p.relative_time, strict=True))
    assert min(rel, key=rel.get) == 64 and min(rel.values()) >= 1.0
    assert rel[4] == pytest.approx(
        (1 + 16) * (ALPHA + 4 * BETA) / ((1 + 64 / 71.55) * (ALPHA + 71.55 * BETA)), rel=1e-3
    )
    assert relative_time([71.55], 64, ALPHA, BETA)[0] == pytest.approx(1.0, abs=1e-6)
    assert json.loads(json.dumps(p.as_dict()))["best_power_of_two"] == 64
    text = "\n".join(describe_prediction(p))
    assert "predicted critical batch ~ 64" in text and "predicted best batch for time to target: ~72" in text
    assert predict_from_profile(profile_sweep(sizes=(32,))) is None  # one batch size: no step-time line


def test_a_later_sweep_says_how_far_the_prediction_was_off():
    from batchlab.core.analysis.analyse import analyse
    from batchlab.core.analysis.predict import check_prediction, predict_from_profile

    from tests.core.analysis_sweeps import target_sweep

    analysis = analyse(
        target_sweep(linear_from=8)
    )  # a rate rule, Bcrit 64, the same step time: its best is near 72 too
    right = check_prediction(predict_from_profile(profile_sweep(b_simple=64.0)), analysis)
    assert f"the fastest to the target here was batch {analysis.best_measured:,}" in right
    assert "(within one, the goal)" in right
    wrong_profile = predict_from_profile(profile_sweep(b_simple=4096.0))  # best sqrt(4096 x 80) = 572
    wrong = check_prediction(wrong_profile, analysis)
    assert "(not within one, the goal)" in wrong
    # the recommendation carries the same check, and report --json its numbers
    checked = analyse(target_sweep(linear_from=8), wrong_profile)
    assert wrong in checked.recommendation and checked.recommendation.index(wrong) == 2  # after the fastest batch
    check = checked.as_dict()["profile_check"]
    assert check["predicted_best"] == pytest.approx(math.sqrt(4096 * ALPHA / BETA))
    assert check["measured_best"] == analysis.best_measured
    assert check["measured_off"] == pytest.approx(math.log2(check["predicted_best"] / analysis.best_measured))
    assert check["measured_off"] > 1 and check["fitted_bcrit"] == pytest.approx(analysis.critical.bcrit.value)
    assert analysis.profile_check is None and not any("profile" in p for p in analysis.recommendation)
    assert checked.profile_check.differences == {}  # the same task: nothing said about settings
    # a profile of another task (another rate rule, another data size) says the check compares two tasks
    other = replace(wrong_profile, settings={**wrong_profile.settings, "lr_rule": "sqrt", "samples": 5000})
    text = analyse(target_sweep(linear_from=8), other).recommendation[2]
    assert text.endswith(
        "The profile trained something else than this sweep (samples 5000 there, the default here; lr_rule sqrt "
        "there, the default here), so this compares two tasks."
    )


def test_a_profile_picks_three_of_the_presets_batch_sizes_that_can_be_split():
    from batchlab.core.cli import _build_parser
    from batchlab.core.commands.profile import profile_values as _profile_values
    from batchlab.core.spec import build_spec

    args = _build_parser().parse_args(["profile", "--preset", "mnist-cnn-98"])  # its batch sizes are 8 to 512
    spec = build_spec(_profile_values(args))
    assert spec.batch_sizes == (8, 64, 512)  # smallest, middle and largest; each splits into 4 parts
    assert (spec.budget.unit, spec.budget.amount, spec.noise_scale_every, spec.target) == ("steps", 200, 5, None)
    # 16 parts: batch 8 cannot be split into them, so the pick starts at 16 (of 16, 32, ..., 512)
    args = _build_parser().parse_args(["profile", "--preset", "mnist-cnn-98", "--noise-scale-parts", "16"])
    assert build_spec(_profile_values(args)).batch_sizes == (16, 128, 512)


def test_a_profile_of_a_preset_with_a_warmup_measures_past_it():
    """`batchlab profile --preset golmant-lsr` was refused: its 2-epoch warmup (512 steps at batch 16) outlasted
    the 200-step budget. The default budget is now 200 steps after the warmup; --steps is still taken as given."""
    from batchlab.core.cli import _build_parser
    from batchlab.core.commands.profile import profile_values as _profile_values
    from batchlab.core.errors import SpecError
    from batchlab.core.spec import build_spec

    spec = build_spec(_profile_values(_build_parser().parse_args(["profile", "--preset", "golmant-lsr"])))
    assert spec.batch_sizes == (16, 256, 4096) and (spec.budget.unit, spec.budget.amount) == ("steps", 512 + 200)
    given = ["profile", "--preset", "golmant-lsr", "--steps", "600"]
    assert build_spec(_profile_values(_build_parser().parse_args(given))).budget.amount == 600
    with pytest.raises(SpecError, match="warmup"):  # a budget the user chose too short is still refused
        build_spec(
            _profile_values(_build_parser().parse_args(["profile", "--preset", "golmant-lsr", "--steps", "100"]))
        )


# ---------------------------------------------------------------------- a real profile: file, report, check


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory):
    """`batchlab profile` at batch sizes 16 and 32 on a tiny MLP, measuring every 2 steps (one child per run)."""
    from batchlab.core.cli import main

    path = tmp_path_factory.mktemp("noise") / "profile.h5"
    argv = ["profile", "--preset", "mnist-mlp", "--samples", "256", "--val-samples", "0", "--device", "cpu"]
    argv += ["--batch-sizes", "16,32", "--steps", "8", "--noise-scale-every", "2", "--out", str(path)]
    assert main(argv) == 0
    return path


def test_a_profile_stores_the_measurements_and_the_report_predicts(profile_file, capsys):
    from batchlab.core.analysis.analyse import analyse
    from batchlab.core.cli import main
    from batchlab.core.events import NOISE_SCALE_COLUMN_NAMES
    from batchlab.core.model import SweepData
    from batchlab.core.runfile.reader import read_run_file

    record = read_run_file(profile_file)
    assert record.attrs["mode"] == "profile" and record.spec["budget"] == {"unit": "steps", "amount": 8}
    run = record.runs[1]
    assert run.status == "ok" and (run.attrs["noise_scale_every"], run.attrs["noise_scale_parts"]) == (2, 4)
    table = run.noise_scale
    assert set(table) == set(NOISE_SCALE_COLUMN_NAMES) and table["step"].tolist() == [0, 2, 4, 6]
    assert (table["small_batch"] == 8).all() and (table["big_batch"] == 32).all()
    assert (table["g_small_sq"] > table["g_big_sq"]).all()  # 8-sample gradients are noisier than 32-sample ones
    assert np.isfinite(table["measure_time"]).all() and np.isfinite(table["step_time"]).all()
    assert table["traced"].tolist() == [1, 0, 0, 0]
    sweep = SweepData.from_file(profile_file)
    live_b = sweep.runs[1].noise_scale.as_dict()["b_simple"].tolist()
    assert live_b == pytest.approx(table["b_simple"].tolist(), nan_ok=True)
    final = noise_scale_series(table).final
    slot = analyse(sweep).noise_scale  # the analysis's noise-scale slot reads the same table
    assert slot is None if not math.isfinite(final) else slot.per_batch[32] == pytest.approx(final)
    capsys.readouterr()
    assert main(["report", str(profile_file)]) == 0
    out = capsys.readouterr().out
    assert "Gradient noise scale" in out and "batch 32, seed 0: " in out
    assert "noise scale cost: measured steps " in out and "every 2 steps: +" in out
    assert "Prediction from this profile" in out
    from batchlab.core.analysis.predict import predict_from_profile

    assert main(["report", str(profile_file), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    prediction = predict_from_profile(sweep)
    assert payload["profile_prediction"] == (prediction.as_dict() if prediction is not None else None)
    code = main(["report", str(profile_file), "--profile", str(profile_file)])
    captured = capsys.readouterr()
    if predict_from_profile(sweep) is None:  # a tiny profile may end without gradient signal above the noise
        assert code == 2 and "holds no prediction" in captured.err
    else:  # a profile trains to no target: it cannot check itself, and says so (or it predicted no best batch)
        assert code == 0
        out = " ".join(captured.out.split())  # the recommendation is wrapped
        assert "can neither confirm nor refute it" in out or "no best batch" in out
