"""Fused and compiled execution: K steps per call record the same per-step losses as one step per call.

The training runs in one fresh Python shared by the assertions (this test process never imports
TensorFlow); the spec checks are pure."""

import json
import subprocess
import sys

import pytest
from batchlab.core import cli
from batchlab.core.errors import SpecError
from batchlab.core.spec import MIXED_PRECISION_ON_CPU, build_spec

from tests.core.test_cli import assert_one_line_error, batchlab

SCRIPT = """
import json, os
os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
from batchlab.core.errors import SpecError
from batchlab.core.spec import build_spec
from batchlab.core.training.run import train_run

# 100 samples at batch 16: 7 steps an epoch, the last of 4 samples; evaluations every 3 steps and a step
# decay of the rate every epoch, so calls of 4 are cut at evaluation points and epoch ends. Shuffled: the
# fused calls, which gather their batches from the arrays on the device, must train in the pipeline's order.
BASE = {"preset": "mnist-autoencoder", "samples": 100, "val_samples": 20, "epochs": 2, "batch_sizes": [16],
        "shuffle": True,
        "eval_every": 3, "lr_rule": "linear", "lr_base_batch": 8, "lr_schedule": "step", "lr_decay_every": 1,
        "lr_decay_factor": 0.5}

def run(**changes):
    events = []
    train_run(build_spec({**BASE, **changes}).runs()[0], events.append, lambda: False, None, None, "cpu")
    steps = [e for e in events if e["type"] == "steps"]
    column = lambda name: [v for e in steps for v in e[name]]
    started = next(e for e in events if e["type"] == "run_started")
    ended = next(e for e in events if e["type"] == "run_ended")
    return {
        "status": ended["status"], "message": ended["message"], "samples_per_s": ended["samples_per_s"],
        **{name: column(name) for name in ("step", "loss", "lr", "batch_size", "step_time", "fetch_time", "traced")},
        "evaluations": [[e["steps"], e["val_loss"]] for e in events if e["type"] == "evaluation"],
        "epochs": [e["train_loss"] for e in events if e["type"] == "epoch_ended"],
        "attrs": {k: started[k] for k in ("steps_per_call", "step_timing", "xla", "precision")},
        "xla_choice": started["xla_choice"],
    }

out = {"one": run(), "fused": run(fused=4), "fused_xla": run(fused=4, xla=True), "fused_auto": run(fused=4, xla="auto")}
try:
    from batchlab.core.training.workloads import build_model
    from batchlab.core.datasets import load_spec_data, prepare_arrays
    spec = build_spec({**BASE, "mixed_precision": True})
    build_model(spec.runs()[0], prepare_arrays(load_spec_data(spec), spec.workload, 100, 20, None))
    out["mixed"] = "built"
except SpecError as e:
    out["mixed"] = str(e)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def runs():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_fused_steps_record_each_steps_own_loss_as_the_one_step_loop(runs):
    one, fused = runs["one"], runs["fused"]
    assert one["status"] == fused["status"] == "ok"
    assert fused["step"] == one["step"] == list(range(14))  # one row per step, in order
    assert fused["batch_size"] == one["batch_size"] == [16] * 6 + [4] + [16] * 6 + [4]
    assert fused["lr"] == one["lr"] and len(set(one["lr"])) == 2  # the rate decayed after epoch 0
    assert len(set(one["loss"])) == 14  # every step's own loss, not a mean repeated over a call
    for a, b in zip(one["loss"], fused["loss"], strict=True):
        assert b == pytest.approx(a, rel=1e-5)
    # evaluations at the same steps (calls cut at every 3rd step and at epoch ends), same figures
    assert [s for s, _ in fused["evaluations"]] == [s for s, _ in one["evaluations"]] == [3, 6, 7, 9, 12, 14]
    for (_, a), (_, b) in zip(one["evaluations"], fused["evaluations"], strict=True):
        assert b == pytest.approx(a, rel=1e-5)
    assert fused["epochs"] == pytest.approx(one["epochs"], rel=1e-5)


def test_fused_steps_are_marked_as_timed_per_call(runs):
    fused, one = runs["fused"], runs["one"]
    assert fused["attrs"] == {"steps_per_call": 4, "step_timing": "per call", "xla": 0, "precision": "float32"}
    assert one["attrs"]["steps_per_call"] == 1 and one["attrs"]["step_timing"] == "per step"
    # steps 0-2 are the first call (cut at the evaluation after step 3): one time each, the call's / 3
    assert fused["step_time"][0] == fused["step_time"][1] == fused["step_time"][2] > 0
    assert all(f is None or f != f for f in fused["fetch_time"])  # NaN: fetched inside the call, not timed apart
    assert fused["traced"][:3] == [1, 1, 1] and not any(fused["traced"][3:])  # only the first call traced
    assert fused["samples_per_s"] > 0


def test_xla_compiles_the_fused_step_and_keeps_the_losses(runs):
    xla, one = runs["fused_xla"], runs["one"]
    assert xla["status"] == "ok" and xla["attrs"]["xla"] == 1
    for a, b in zip(one["loss"], xla["loss"], strict=True):
        assert b == pytest.approx(a, rel=1e-4)  # XLA may fuse and reorder float32 sums


def test_xla_auto_leaves_a_short_run_uncompiled_and_says_why_in_the_file(runs):
    auto, fused = runs["fused_auto"], runs["fused"]
    assert auto["status"] == "ok" and auto["attrs"]["xla"] == 0  # 14 steps cannot repay a compile
    assert auto["xla_choice"].startswith("auto: off, 14 steps x ~3.0 ms saved = ~0.0 s < ~2.5 s compile")
    assert auto["loss"] == fused["loss"]  # the same graph function
    assert runs["fused_xla"]["xla_choice"] == "on (--xla)" and fused["xla_choice"].startswith("off")


def test_xla_auto_cost_model_compiles_where_the_steps_repay_the_compile():
    from batchlab.core.training.xla_choice import break_even_steps, choose_xla, saving_per_step

    # 2.8 ms + 13.5 us x B saved per step against a 2.5 s compile (docs/benchmarks.md, "Cheaper XLA compiles")
    assert saving_per_step(8) == pytest.approx(2.908e-3) and saving_per_step(512) == pytest.approx(9.712e-3)
    assert break_even_steps(8) == 860  # 2.5 / 2.908e-3 = 859.7
    assert break_even_steps(512) == 258  # 2.5 / 9.712e-3 = 257.4
    assert choose_xla("auto", 860, 8, on_gpu=False).compile is True
    assert choose_xla("auto", 859, 8, on_gpu=False).compile is False
    # the default mnist-autoencoder sweep (5,000 samples, 10 epochs): batch 8-64 compile, 128-512 do not
    steps = {8: 6250, 16: 3130, 32: 1570, 64: 790, 128: 400, 256: 200, 512: 100}
    chosen = {b: choose_xla("auto", n, b, on_gpu=False).compile for b, n in steps.items()}
    assert chosen == {8: True, 16: True, 32: True, 64: True, 128: False, 256: False, 512: False}
    assert "6,250 steps x ~2.9 ms saved = ~18.2 s >= ~2.5 s compile" in choose_xla("auto", 6250, 8, False).reason
    assert choose_xla("auto", 10, 8, on_gpu=True).compile is None  # on a GPU: Keras's own choice
    assert choose_xla(True, 10, 8, on_gpu=False).compile is True
    assert choose_xla(False, 10**6, 8, on_gpu=False).compile is None


def test_xla_cache_adds_tensorflows_persistent_cache_flag_once_and_keeps_other_flags(tmp_path):
    from batchlab.core.training.xla_choice import enable_xla_cache, xla_cache_in_use

    env = {"TF_XLA_FLAGS": "--tf_xla_auto_jit=0"}
    assert xla_cache_in_use(env) == ""
    enable_xla_cache(tmp_path / "xla", env)
    enable_xla_cache(tmp_path / "xla", env)
    flags = env["TF_XLA_FLAGS"].split()
    assert flags[0] == "--tf_xla_auto_jit=0"
    assert flags.count(f"--tf_xla_persistent_cache_directory={tmp_path / 'xla'}") == 1
    assert xla_cache_in_use(env) == str(tmp_path / "xla") and (tmp_path / "xla").is_dir()


def test_mixed_precision_is_refused_where_tensorflow_sees_no_gpu(runs):
    assert runs["mixed"] == f"mixed_precision: {MIXED_PRECISION_ON_CPU}"


@pytest.mark.parametrize(
    ("values", "field", "phrase"),
    [
        ({"fused": 0}, "fused", "from 1"),
        ({"fused": "four"}, "fused", "not an integer"),
        ({"fused": 8, "loop": "fit"}, "fused", "loop fit"),
        ({"fused": 8, "sync": "sampled"}, "fused", "sync sampled"),
        ({"fused": 8, "noise_scale_every": 10}, "fused", "noise_scale_every"),
        ({"mixed_precision": True, "device": "cpu"}, "mixed_precision", "unsupported on CPU"),
        ({"xla": "maybe"}, "xla", "true, false or auto"),
    ],
)
def test_execution_settings_refused_in_one_line(values, field, phrase):
    with pytest.raises(SpecError) as error:
        build_spec({"preset": "mnist-autoencoder", **values})
    assert error.value.field == field and phrase in error.value.message


def test_execution_settings_default_off_and_round_trip():
    spec = build_spec({"preset": "mnist-autoencoder"})
    assert (spec.fused, spec.xla, spec.mixed_precision) == (1, False, False)
    fused = build_spec({"preset": "mnist-autoencoder", "fused": "16", "xla": True})
    assert type(fused).from_dict(fused.to_dict()) == fused and fused.fused == 16
    auto = build_spec({"preset": "mnist-autoencoder", "xla": " Auto "})
    assert auto.xla == "auto" and type(auto).from_dict(auto.to_dict()) == auto
    cli_args = cli._build_parser().parse_args
    assert [cli_args(["sweep", *a]).xla for a in (["--xla"], ["--xla", "auto"], [])] == [True, "auto", None]


def test_cli_refuses_mixed_precision_on_the_cpu():
    result = batchlab("sweep", "--preset", "mnist-autoencoder", "--device", "cpu", "--mixed-precision")
    assert_one_line_error(result, "mixed_precision", "unsupported on CPU")


def test_the_explanation_names_fused_and_compiled_execution_only_when_used():
    from batchlab.core.analysis.explain import explain_sweep

    from tests.core.test_explain import synthetic_sweep

    sweep = synthetic_sweep()
    assert not any(line.startswith("Execution:") for line in explain_sweep(sweep))
    for run in sweep.ordered_runs():
        run.attrs.update(steps_per_call=8, step_timing="per call", xla=1, precision="mixed_float16")
    (line,) = [line for line in explain_sweep(sweep) if line.startswith("Execution:")]
    assert "fused, 8 steps per call" in line and "XLA" in line and "mixed_float16 with loss scaling" in line
    sweep.spec["xla"] = "auto"
    for run in sweep.ordered_runs():
        run.attrs["xla"] = int(run.batch_size <= 64)
    (line,) = [line for line in explain_sweep(sweep) if line.startswith("Execution:")]
    sizes = sorted({r.batch_size for r in sweep.ordered_runs()})
    on, off = [b for b in sizes if b <= 64], [b for b in sizes if b > 64]
    assert f"(--xla auto): compiled at {', '.join(map(str, on))}, not at {', '.join(map(str, off))}" in line


def test_nvml_finds_the_gpu_by_the_bus_id_tensorflow_reports_in_both_domain_widths():
    from batchlab.core.training.memory import _nvml_bus_ids

    assert _nvml_bus_ids("0000:3b:00.0") == ["0000:3b:00.0", "00000000:3b:00.0"]
    assert _nvml_bus_ids("00000000:3B:00.0") == ["00000000:3B:00.0", "00000000:3B:00.0"]
