"""Reused training children on the CPU: one TensorFlow import per sweep, a fresh process after any failure,
and the same numbers as a process per run. Two tiny sweeps shared by every test (a few hundred samples,
one epoch), since each child imports TensorFlow."""

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from batchlab.core.analysis.startup import explain_startup
from batchlab.core.model import SweepData
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import SweepRunner, run_sweep
from batchlab.core.training.trainer import TEST_FAIL_RUN_ENV

REPO = Path(__file__).resolve().parents[2]
TINY = {"preset": "mnist-mlp", "samples": 256, "val_samples": 0, "epochs": 1, "device": "cpu"}
FAILING_RUN = 2  # of batch sizes 16, 32, 64, 128: the batch-64 run fails after its run_started


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """(reused, fresh): a default sweep whose third run fails, and the CLI's --fresh-children sweep of the
    second run's batch size alone."""
    folder = tmp_path_factory.mktemp("reuse")
    reused = folder / "reused.h5"
    spec = build_spec({**TINY, "batch_sizes": "16,32,64,128"})
    os.environ[TEST_FAIL_RUN_ENV] = str(FAILING_RUN)  # the children inherit it
    try:
        status = run_sweep(spec, reused, runner=SweepRunner(spec))
    finally:
        del os.environ[TEST_FAIL_RUN_ENV]
    assert status == "complete"
    assert not multiprocessing.active_children()  # the idle child of the last run was let go and reaped
    fresh = folder / "fresh.h5"
    options = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    done = subprocess.run(
        [sys.executable, str(REPO / "main.py"), "sweep", *options, "--batch-sizes=32", "--fresh-children"]
        + ["--quiet", "--out", str(fresh)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    return read_run_file(reused), read_run_file(fresh), reused


def test_one_process_trains_runs_until_one_fails_then_a_fresh_one_takes_over(sweeps):
    record, _, _ = sweeps
    runs = record.runs
    assert [r.status for r in runs] == ["ok", "ok", "error", "ok"]
    assert "a failure injected by a test" in runs[FAILING_RUN].message
    # the probe's child took the first run, then trained the next ones; after the failure a new process
    assert [r.attrs["child"] for r in runs] == ["probe", "reused", "reused", "fresh"]
    pids = [int(r.attrs["pid"]) for r in runs]
    assert pids[0] == pids[1] == pids[2] != pids[3]
    # a reused run paid no process start and no import, and kept the data; a fresh one paid them all
    for name in ("startup_process_s", "startup_import_s", "startup_data_s", "startup_prepared_s"):
        assert runs[1].attrs[name] == 0.0
    assert runs[3].attrs["startup_import_s"] > 0 and runs[3].attrs["startup_prepared_s"] == 0.0
    # the probe child's import (with the spec's check) was done before its run was asked for
    assert 0 < runs[0].attrs["startup_prepared_s"] and runs[0].attrs["startup_import_s"] > 0
    # every run's memory is measured in its own epochs, reused or not
    for run in (runs[0], runs[1], runs[3]):
        assert run.epochs["rss_peak_bytes"][0] > 50 << 20
        assert run.attrs["rss_before_training_bytes"] > 50 << 20


def test_a_reused_child_trains_exactly_what_a_fresh_child_trains(sweeps):
    record, fresh_record, _ = sweeps
    reused, fresh = record.runs[1], fresh_record.runs[0]
    assert (reused.batch_size, reused.seed) == (fresh.batch_size, fresh.seed) == (32, 0)
    assert reused.attrs["child"] == "reused" and fresh.attrs["child"] == "standby"  # --fresh-children: no reuse
    assert len(reused.steps["loss"]) == len(fresh.steps["loss"]) == 8
    np.testing.assert_allclose(reused.steps["loss"], fresh.steps["loss"], rtol=1e-6)
    np.testing.assert_allclose(reused.epochs["train_loss"], fresh.epochs["train_loss"], rtol=1e-6)


def test_the_explanation_names_each_kind_of_child(sweeps):
    _, _, path = sweeps
    text = "\n".join(explain_startup(SweepData.from_file(path).ordered_runs()))
    assert "run 1 (the probe's child" in text
    assert "runs 2, 3 (a reused child" not in text  # run 3 failed before its first step: no start-up to explain
    assert "run 2 (a reused child: the process that trained the run before" in text
    assert "no process start or TensorFlow import" in text
    assert "run 4 (a fresh child" in text
