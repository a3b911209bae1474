"""Learning-rate rules, schedules and optimizers: known answers for the pure math (core/lr_rules.py), the
Keras schedules and LARS checked against it in a subprocess (this process stays free of TensorFlow),
spec errors, and short real runs whose `lr` column follows the rule."""

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from batchlab.core import cli
from batchlab.core.errors import SpecError
from batchlab.core.lr_rules import LrPlan, Plateau, plan_for, scaled_lr
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec, spec_errors
from batchlab.core.sweep.runner import run_sweep
from batchlab.core.training.hooks import LearningRateLog


def _plan(**kw) -> LrPlan:
    values = dict(
        lr0=0.1, peak=0.1, warmup_steps=0, schedule="constant", total_steps=100, decay_factor=0.1, decay_every_steps=10
    )
    values.update(kw)
    return LrPlan(**values)


def _in_child(code: str) -> dict:
    """Run `code` (which sets `result`) in a fresh Python with Keras on the CPU; return `result`."""
    script = "import os, json\nos.environ['CUDA_VISIBLE_DEVICES'] = '-1'\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
    script += textwrap.dedent(code) + "\nprint('RESULT' + json.dumps(result))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT") :])


# ---------------------------------------------------------------- rules and schedules: known answers


def test_rules_scale_the_base_rate_with_the_batch_size():
    assert scaled_lr(0.1, "constant", 1024, 256) == 0.1
    assert scaled_lr(0.1, "linear", 1024, 256) == pytest.approx(0.4)  # Goyal: x B/256
    assert scaled_lr(0.1, "sqrt", 1024, 256) == pytest.approx(0.2)
    assert scaled_lr(0.1, "linear", 64, 256) == pytest.approx(0.025)
    assert scaled_lr(0.1, "sqrt", 64, 256) == pytest.approx(0.05)


def test_warmup_rises_linearly_from_lr0_to_the_scaled_rate():
    plan = _plan(lr0=0.1, peak=0.4, warmup_steps=4)
    assert plan.rates(7) == pytest.approx([0.1, 0.175, 0.25, 0.325, 0.4, 0.4, 0.4])
    # A batch at or below B0 (peak <= lr0) has nothing to warm up to: the rate is its own from step 0.
    assert _plan(lr0=0.1, peak=0.05, warmup_steps=4).rates(3) == pytest.approx([0.05, 0.05, 0.05])


def test_step_decay_multiplies_by_the_factor_every_interval_from_step_0():
    plan = _plan(peak=1.0, lr0=1.0, schedule="step", decay_factor=0.1, decay_every_steps=3)
    assert plan.rates(7) == pytest.approx([1, 1, 1, 0.1, 0.1, 0.1, 0.01])
    warm = _plan(lr0=0.5, peak=1.0, schedule="step", decay_factor=0.5, decay_every_steps=4, warmup_steps=2)
    assert warm.rates(9) == pytest.approx([0.5, 0.75, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25])


def test_cosine_decays_from_the_peak_to_zero_over_the_budget_after_warmup():
    plan = _plan(lr0=1.0, peak=1.0, schedule="cosine", total_steps=4)
    assert plan.rates(5) == pytest.approx(
        [1.0, 0.5 + 0.5 * math.cos(math.pi / 4), 0.5, 0.5 - 0.5 * math.cos(math.pi / 4), 0]
    )
    warm = _plan(lr0=0.2, peak=1.0, schedule="cosine", total_steps=6, warmup_steps=2)
    assert warm.rates(7) == pytest.approx(
        [0.2, 0.6, 1.0, 0.5 + 0.5 * math.cos(math.pi / 4), 0.5, 0.5 - 0.5 * math.cos(math.pi / 4), 0]
    )


def test_plateau_lowers_the_scale_after_patience_epochs_without_improvement():
    plateau = Plateau(factor=0.1, patience=2)
    losses = [1.0, 0.9, 0.95, 0.9, 0.8, 0.85, 0.85, 0.85, math.nan]
    # 0.9 again is no improvement (not below the best by more than 1e-4); NaN is no improvement either.
    assert [plateau.update(v) for v in losses] == pytest.approx([1, 1, 1, 0.1, 0.1, 0.1, 0.01, 0.01, 0.001])


def test_the_rate_hook_writes_each_steps_rate_and_applies_plateau_at_epoch_ends():
    given = []
    hook = LearningRateLog(
        _plan(lr0=0.5, peak=0.5, schedule="plateau", decay_factor=0.5, patience=1), set_scale=given.append
    )
    rows = []
    for epoch, val_loss in enumerate([1.0, 1.2, 0.5]):
        for step in range(epoch * 2, epoch * 2 + 2):
            row = {"step": step}
            hook.on_train_batch_end(step, row)
            rows.append(row["lr"])
        hook.on_epoch_end(epoch, {"val_loss": val_loss})
    assert rows == pytest.approx([0.5, 0.5, 0.5, 0.5, 0.25, 0.25])
    assert given == [0.5]  # the optimizer is told once, when the scale changed
    row = {}
    LearningRateLog(constant=0.01).on_train_batch_end(0, row)
    assert row["lr"] == 0.01


def test_a_spec_plans_each_batch_size_from_the_smallest_or_the_given_base_batch():
    spec = build_spec({"preset": "mnist-cnn", "batch_sizes": "16,64", "lr_rule": "srsr", "warmup": 1})
    plan = plan_for(spec, 64, steps_per_epoch=157, total_steps=3 * 157)
    assert (plan.lr0, plan.peak, plan.warmup_steps, plan.base_batch) == (0.02, pytest.approx(0.04), 157, 16)
    spec = build_spec({"preset": "mnist-cnn", "lr_rule": "lsr", "lr_base_batch": 256})
    assert plan_for(spec, 1024, 10, 30).peak == pytest.approx(0.08)
    assert plan_for(build_spec({"preset": "mnist-cnn", "lr": ""}), 64, 10, 30) is None


# ---------------------------------------------------------------- Keras applies the same numbers


def test_keras_schedules_give_the_planned_rate_at_every_step():
    plans = [
        _plan(lr0=0.1, peak=0.4, warmup_steps=5, total_steps=30),
        _plan(
            lr0=0.1, peak=0.4, warmup_steps=0, schedule="step", decay_factor=0.5, decay_every_steps=7, total_steps=30
        ),
        _plan(
            lr0=0.1, peak=0.4, warmup_steps=5, schedule="step", decay_factor=0.5, decay_every_steps=7, total_steps=30
        ),
        _plan(lr0=0.1, peak=0.4, warmup_steps=0, schedule="cosine", total_steps=30),
        _plan(lr0=0.1, peak=0.4, warmup_steps=5, schedule="cosine", total_steps=30),
        _plan(lr0=0.1, peak=0.4, warmup_steps=5, schedule="plateau", total_steps=30),
        _plan(lr0=0.1, peak=0.4, warmup_steps=5, total_steps=30),  # scalable: a batch schedule's decay
    ]
    code = f"""
        from batchlab.core.lr_rules import LrPlan
        from batchlab.core.training.schedules import build_schedule
        result = []
        for i, p in enumerate({[p.__dict__ for p in plans]!r}):
            s = build_schedule(LrPlan(**p), scalable=i == {len(plans) - 1})
            lr = s.learning_rate
            rates = [float(lr(step)) if callable(lr) else float(lr) for step in range(35)]
            s.set_scale(0.1)
            scaled = [float(lr(step)) if callable(lr) else float(lr) for step in (3, 20)]
            result.append({{"rates": rates, "scaled": scaled}})
    """
    for i, (plan, got) in enumerate(zip(plans, _in_child(code), strict=True)):
        # float32 in Keras: within 1e-6 of the rate, or of the peak where cosine nears 0
        assert got["rates"] == pytest.approx(plan.rates(35), rel=1e-6, abs=1e-6 * plan.peak), plan
        scale = 0.1 if plan.schedule == "plateau" or i == len(plans) - 1 else 1.0
        assert got["scaled"] == pytest.approx([plan.rate(3, scale), plan.rate(20, scale)], rel=1e-6)


# ---------------------------------------------------------------- optimizers


def _lars_by_hand(w, b, x, t, lr, momentum, wd, eta, steps):
    """LARS (You et al., Algorithm 1) on a linear layer y = x w + b with mean squared error, in float64."""
    vw, vb = np.zeros_like(w), np.zeros_like(b)
    out = []
    for _ in range(steps):
        err = x @ w + b - t
        gw = 2 * x.T @ err / err.size
        gb = 2 * err.sum(axis=0) / err.size
        wn, gn = np.linalg.norm(w), np.linalg.norm(gw)
        trust = eta * wn / (gn + wd * wn)
        vw = momentum * vw + lr * trust * (gw + wd * w)
        vb = momentum * vb + lr * gb  # the bias: no trust ratio, no weight decay
        w, b = w - vw, b - vb
        out.append((w.copy(), b.copy()))
    return out


def test_lars_update_equals_a_hand_computation():
    w = np.array([[0.5, -0.3, 0.8], [0.1, 0.4, -0.6]])
    b = np.array([0.05, -0.1, 0.2])
    x = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -0.7], [2.0, 1.0]])
    t = np.array([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5], [0.0, 1.0, 0.0], [-1.0, 2.0, 1.0]])
    lr, momentum, wd, eta = 2.0, 0.9, 0.01, 0.02
    code = f"""
        import keras, numpy as np
        from batchlab.core.training.optimizers import LARS
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)])
        model.set_weights([np.array({w.tolist()}), np.array({b.tolist()})])
        opt = LARS(learning_rate={lr}, momentum={momentum}, weight_decay={wd}, trust_coefficient={eta})
        model.compile(optimizer=opt, loss="mse")
        result = []
        for _ in range(3):
            model.train_on_batch(np.array({x.tolist()}), np.array({t.tolist()}))
            result.append([v.tolist() for v in model.get_weights()])
    """
    got = _in_child(code)
    expected = _lars_by_hand(w, b, x, t, lr, momentum, wd, eta, 3)
    for (gw, gb), (ew, eb) in zip(got, expected, strict=True):
        assert np.asarray(gw) == pytest.approx(ew, rel=1e-5, abs=1e-7)
        assert np.asarray(gb) == pytest.approx(eb, rel=1e-5, abs=1e-7)
    # The trust ratio matters: plain momentum SGD at the same rate would land elsewhere.
    assert not np.allclose(expected[0][0], w - lr * 2 * x.T @ (x @ w + b - t) / t.size)


def test_every_named_optimizer_is_built_with_its_settings_and_trains():
    specs = {
        "sgd": {"optimizer": "sgd", "momentum": 0.9, "nesterov": True},
        "adam": {"optimizer": "adam"},
        "adamw": {"optimizer": "adamw", "weight_decay": 0.05},
        "lamb": {"optimizer": "lamb", "weight_decay": 0.01},
        "lars": {"optimizer": "lars", "momentum": 0.9, "weight_decay": 0.001, "lr": 1.0},
    }
    code = f"""
        import keras, numpy as np
        from batchlab.core.spec import build_spec
        from batchlab.core.training.workloads import spec_optimizer
        result = {{}}
        for name, values in {specs!r}.items():
            opt = spec_optimizer(build_spec(values))
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
            model.compile(optimizer=opt, loss="mse")
            before = model.get_weights()[0].copy()
            model.train_on_batch(np.ones((8, 4)), np.zeros((8, 2)))
            config = opt.get_config()
            result[name] = {{
                "class": type(opt).__name__,
                "moved": bool(np.abs(model.get_weights()[0] - before).max() > 0),
                "nesterov": config.get("nesterov"),
                "momentum": config.get("momentum"),
                "weight_decay": config.get("weight_decay"),
            }}
    """
    got = _in_child(code)
    assert {k: v["class"] for k, v in got.items()} == {
        "sgd": "SGD",
        "adam": "Adam",
        "adamw": "AdamW",
        "lamb": "Lamb",
        "lars": "LARS",
    }
    assert all(v["moved"] for v in got.values())
    assert got["sgd"]["nesterov"] is True and got["sgd"]["momentum"] == 0.9
    assert got["adamw"]["weight_decay"] == pytest.approx(0.05)
    assert got["lamb"]["weight_decay"] == pytest.approx(0.01)
    assert got["lars"]["weight_decay"] == pytest.approx(0.001) and got["lars"]["momentum"] == 0.9


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        ({"warmup": 20, "epochs": 10}, "warmup", "not shorter than the budget of batch size 512"),
        (
            {"warmup": 100, "warmup_unit": "steps", "samples": 1024, "batch_sizes": "64,512", "epochs": 5},
            "warmup",
            "batch size 512 (10 steps",
        ),
        ({"warmup": 2.5, "warmup_unit": "steps"}, "warmup", "not a whole number of steps"),
        ({"warmup": 1}, "warmup", "nothing to ramp"),
        ({"warmup": -1}, "warmup", "negative"),
        ({"lr_base_batch": 0}, "lr_base_batch", "0 is too small"),
        ({"lr_base_batch": -8}, "lr_base_batch", "too small"),
        ({"lr_rule": "cubic"}, "lr_rule", "choose constant (BLR), linear (LSR) or sqrt (SRSR)"),
        ({"lr_schedule": "linear"}, "lr_schedule", "choose one of constant, step, cosine, plateau"),
        ({"lr_schedule": "plateau", "val_samples": 0}, "lr_schedule", "needs val_samples > 0"),
        ({"lr_rule": "linear", "lr": ""}, "lr", "needs a base learning rate"),
        ({"lr_decay_factor": 1.5}, "lr_decay_factor", "between 0 and 1"),
        ({"lr_patience": 0}, "lr_patience", "too small"),
        ({"nesterov": True}, "nesterov", "applies to sgd, not 'adam'"),
        ({"optimizer": "sgd", "nesterov": "yes"}, "nesterov", "needs momentum > 0"),
        ({"weight_decay": 0.01}, "weight_decay", "not used by 'adam'"),
        ({"optimizer": "lars", "weight_decay": -1}, "weight_decay", "negative"),
        ({"lr_rule": "sqrt", "accumulate": 4}, "lr_rule", "with accumulate 4 is not supported yet"),
    ],
)
def test_bad_learning_rate_settings_name_the_field_and_what_is_allowed(values, field, words):
    errors = spec_errors(values)
    assert field in errors, errors
    assert words in str(errors[field])
    with pytest.raises(SpecError):
        build_spec(values)


def test_a_rule_on_the_model_files_optimizer_is_refused(tmp_path):
    model = tmp_path / "m.keras"
    model.write_bytes(b"not checked before the rule")
    errors = spec_errors({"preset": "keras-file", "model_file": str(model), "lr_rule": "linear", "lr": 0.1})
    assert "needs an optimizer BatchLab builds" in str(errors["lr_rule"])


def test_the_cli_prints_one_line_and_exits_2_for_a_warmup_longer_than_the_budget(capsys):
    assert cli.main(["sweep", "--epochs", "2", "--warmup", "3", "--lr-rule", "lsr"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("batchlab: warmup: 3 epochs is not shorter")


def test_the_cli_help_names_the_rules_schedules_and_optimizers(capsys):
    with pytest.raises(SystemExit):
        cli.main(["sweep", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("--lr-rule", "linear (LSR", "--lr-schedule", "plateau", "--warmup", "--nesterov", "lars", "lamb"):
        assert words in text


# ---------------------------------------------------------------- real runs


@pytest.mark.parametrize("loop", ["loop", "fit"])
def test_a_run_records_the_rate_of_every_step_as_the_rule_and_schedule_give_it(tmp_path, loop):
    # 200 samples: batch 32 has 7 steps an epoch (the last of 8 samples), batch 64 has 4.
    spec = build_spec(
        {
            "preset": "mnist-mlp",
            "samples": 200,
            "val_samples": 50,
            "epochs": 3,
            "batch_sizes": "32,64",
            "optimizer": "sgd",
            "momentum": 0.9,
            "nesterov": True,
            "lr": 0.01,
            "lr_rule": "linear",
            "warmup": 1,
            "lr_schedule": "step",
            "lr_decay_every": 2,
            "lr_decay_factor": 0.5,
            "device": "cpu",
            "loop": loop,
        }
    )
    out = tmp_path / "lr.h5"
    assert run_sweep(spec, out) == "complete"
    runs = read_run_file(out).runs
    for run, (spe, peak) in zip(runs, [(7, 0.01), (4, 0.02)], strict=True):
        assert run.status == "ok"
        lr = run.steps["lr"]
        assert len(lr) == 3 * spe
        assert run.attrs["lr_peak"] == pytest.approx(peak) and run.attrs["lr_warmup_steps"] == spe
        assert run.attrs["lr_rule"] == "linear" and run.attrs["lr_schedule"] == "step"
        start = 0.01
        expected = [
            start + (peak - start) * s / spe if s < spe else peak * 0.5 ** (s // (2 * spe)) for s in range(3 * spe)
        ]
        assert lr == pytest.approx(expected)
    assert runs[1].steps["lr"][:4] == pytest.approx([0.01, 0.0125, 0.015, 0.0175])  # the warmup of batch 64


@pytest.mark.parametrize("loop", ["loop", "fit"])
def test_reduce_on_plateau_lowers_the_rate_after_a_stalled_validation_loss(tmp_path, loop):
    # At a rate of 1e-9 the validation loss moves far less than 1e-4 an epoch: with patience 1 the
    # second epoch's loss is a plateau, so the third epoch trains at a tenth of the rate.
    spec = build_spec(
        {
            "preset": "mnist-mlp",
            "samples": 128,
            "val_samples": 64,
            "epochs": 3,
            "batch_sizes": "64",
            "optimizer": "sgd",
            "lr": 1e-9,
            "lr_schedule": "plateau",
            "lr_patience": 1,
            "lr_decay_factor": 0.1,
            "device": "cpu",
            "loop": loop,
        }
    )
    out = tmp_path / "plateau.h5"
    assert run_sweep(spec, out) == "complete"
    (run,) = read_run_file(out).runs
    assert run.steps["lr"] == pytest.approx([1e-9, 1e-9, 1e-9, 1e-9, 1e-10, 1e-10])


def test_a_preview_gives_every_steps_rate_for_each_batch_size_before_any_run():
    from batchlab.core.lr_rules import sweep_preview

    spec = build_spec(
        {"preset": "mnist-mlp", "samples": 256, "epochs": 2, "batch_sizes": "32,128", "lr": 0.01, "lr_rule": "lsr"}
        | {"warmup": 1, "lr_schedule": "cosine"}
    )
    preview = sweep_preview(spec)
    assert [len(preview[32]), len(preview[128])] == [16, 4]
    # batch 128: peak 0.04, warmup over its 2 steps of an epoch, then cosine over the last 2 steps
    assert preview[128] == pytest.approx([0.01, 0.025, 0.04, 0.02])
    assert preview[32][:8] == pytest.approx([0.01] * 8)  # B0 = 32: nothing to warm up to
    assert sweep_preview(build_spec({"preset": "mnist-mlp", "lr": ""}))[16] == []
