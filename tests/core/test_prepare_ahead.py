"""Runs prepared ahead (`prepare_ahead`) and TensorFlow's threads (`tf_threads`).

A run prepared ahead builds its model and makes its fused call's first calls (the trace, the compile) while
the previous run trains, then sets every variable back: it must train exactly what a run without preparation
trains. A failed preparation loses nothing (the run starts in a child forked then).

Two things share the time (each one TensorFlow import): a fresh Python that trains one run in-process three
ways (plain; built, warmed up and restored; warmed up without the restore, the control), and, meanwhile, one
tiny sweep of three runs from this process (which never imports TensorFlow): run 0 forked as usual, run 1
prepared ahead while run 0 trains, run 2's preparation fails."""

import json
import multiprocessing
import subprocess
import sys

import numpy as np
import pytest
from batchlab.core import cli
from batchlab.core.analysis.startup import explain_startup
from batchlab.core.errors import SpecError
from batchlab.core.model import SweepData
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import SweepRunner, run_sweep
from batchlab.core.training.faults import FAIL_PREPARE_ENV as TEST_FAIL_PREPARE_ENV

from tests.core.test_cli import assert_one_line_error, batchlab

# 200 samples: batch 32 has a short last batch (8), so the warm-up also runs the short batch's call
TINY = {
    "preset": "mnist-autoencoder",
    "samples": 200,
    "val_samples": 0,
    "epochs": 1,
    "device": "cpu",
    "fused": 4,
    "shuffle": True,
    "tf_threads": 1,
}
SWEEP = {**TINY, "batch_sizes": "16,32,50", "prepare_ahead": True}
FAILING = 2  # its preparation fails

SCRIPT = """
import json, os, sys
os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
from batchlab.core.spec import build_spec
from batchlab.core.training.child import set_threads
from batchlab.core.training import run as run_module

set_threads(tf, 1)  # before the first op, as the training child does
spec = build_spec({**json.loads(sys.argv[1]), "batch_sizes": [32]})
run = spec.runs()[0]

def train(way):
    events = []
    built = None
    if way != "plain":
        hooks = run_module.standard_hooks(0, events.append, None, None)
        built = run_module.build_run(run, events.append, lambda: False, hooks)
        if way == "prepared":
            built.engine.warm_up()
        else:  # the control: the warm-up's first call without setting the variables back
            built.engine.fused.call(tf.range(200), 0, 1, 32)
    run_module.train_run(run, events.append, lambda: False, None, None, "cpu", built=built)
    steps = [e for e in events if e["type"] == "steps"]
    started = next(e for e in events if e["type"] == "run_started")
    return {"loss": [v for e in steps for v in e["loss"]], "traced": [v for e in steps for v in e["traced"]],
            "tf_threads": started["tf_threads"]}

print(json.dumps({way: train(way) for way in ("plain", "prepared", "control")}))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """(in-process results, the sweep's run file, the sweep's log lines), the two made side by side."""
    script = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, json.dumps(TINY)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    path = tmp_path_factory.mktemp("ahead") / "ahead.h5"
    spec = build_spec(SWEEP)
    events = []
    mp = pytest.MonkeyPatch()
    mp.setenv(TEST_FAIL_PREPARE_ENV, str(FAILING))  # the fork server and its children inherit it
    try:
        status = run_sweep(spec, path, sink=events.append, runner=SweepRunner(spec))
    finally:
        mp.undo()
    out, err = script.communicate(timeout=600)
    assert script.returncode == 0, err[-3000:]
    assert status == "complete"
    assert not multiprocessing.active_children()
    logs = [e["message"] for e in events if e["type"] == "log"]
    return json.loads(out.strip().splitlines()[-1]), read_run_file(path), logs, path


def test_a_prepared_run_trains_exactly_what_an_unprepared_run_trains(results):
    ways = results[0]
    plain, prepared, control = ways["plain"], ways["prepared"], ways["control"]
    assert len(plain["loss"]) == 7 and len(set(plain["loss"])) == 7  # every step's own loss
    assert prepared["loss"] == plain["loss"]  # exactly: every variable was set back after the warm-up
    assert control["loss"][0] != plain["loss"][0]  # without the restore the warm-up's step would show
    assert plain["traced"][0] == 1 and not any(prepared["traced"])  # the trace was paid ahead
    assert plain["tf_threads"] == prepared["tf_threads"] == 1


def test_a_sweep_prepares_the_next_run_while_one_trains_and_records_it(results):
    ways, record, logs, path = results
    runs = record.runs
    assert [r.status for r in runs] == ["ok"] * 3
    assert [r.attrs["child"] for r in runs] == ["forked"] * 3
    assert [int(r.attrs["tf_threads"]) for r in runs] == [1] * 3  # what TensorFlow said it runs with
    ahead = [float(r.attrs["prepared_ahead_s"]) for r in runs]
    assert np.isnan(ahead[0]) and ahead[1] > 0 and np.isnan(ahead[2])
    # the prepared run's turn came after its preparation: it started training at once, without tracing
    assert runs[1].attrs["startup_s"] < ahead[1] and not runs[1].steps["traced"].any()
    assert runs[2].steps["traced"][0] == 1  # prepared in vain, then forked when its turn came
    # the prepared (forked) run 1 trained what the in-process plain run of the same spec trained
    np.testing.assert_allclose(runs[1].steps["loss"], ways["plain"]["loss"], rtol=1e-6)
    failed = [m for m in logs if "could not be prepared ahead" in m]
    assert len(failed) == 1 and f"run {FAILING} could not" in failed[0]
    assert f"{TEST_FAIL_PREPARE_ENV}={FAILING}" in failed[0]  # why, in the log


@pytest.mark.parametrize(
    "values, field, phrase",
    [
        ({"tf_threads": -1}, "tf_threads", "from 1 to 1024, or 0 for TensorFlow's default"),
        ({"tf_threads": "two"}, "tf_threads", "'two' is not an integer"),
        ({"tf_threads": 5000}, "tf_threads", "5000 is too large"),
        ({"prepare_ahead": "maybe"}, "prepare_ahead", "use true or false"),
        ({"prepare_ahead": True, "fused": 1}, "prepare_ahead", "use fused 2 or more"),
    ],
)
def test_the_settings_are_refused_in_one_line_naming_the_field(values, field, phrase):
    with pytest.raises(SpecError) as e:
        build_spec({"preset": "mnist-autoencoder", **values})
    assert e.value.field == field and phrase in e.value.message and "\n" not in str(e.value)


def test_the_settings_default_off_and_come_from_the_command_line():
    spec = build_spec({"preset": "mnist-autoencoder"})
    assert (spec.tf_threads, spec.prepare_ahead) == (0, False)
    args = cli._build_parser().parse_args(["sweep", "--fused", "64", "--threads", "1", "--prepare-ahead"])
    spec = build_spec(cli.sweep_values(args))
    assert (spec.tf_threads, spec.prepare_ahead, spec.fused) == (1, True, 64)
    assert type(spec).from_dict(spec.to_dict()) == spec


def test_cli_refuses_a_bad_thread_count_in_one_line():
    result = batchlab("sweep", "--threads", "-2")
    assert_one_line_error(result, "tf_threads", "or 0 for TensorFlow's default")


def test_the_explanation_says_which_runs_were_prepared_ahead(results):
    text = "\n".join(explain_startup(SweepData.from_file(results[3]).ordered_runs()))
    assert "Run 1 (prepared ahead: forked while the run before trained" in text
    assert "runs 0, 2 (a forked child" in text  # the others, as before
