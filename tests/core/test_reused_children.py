"""Training children on the CPU. Forked children (the default on Linux): a fork server imports TensorFlow
once and forks a process per run, so a failed run loses that run only and every run's memory starts from
the same baseline. Reused children (--reuse-children): one TensorFlow import per sweep, a fresh process
after any failure. Both train the same numbers as a fresh process. Three tiny sweeps shared by every test
(a few hundred samples, one epoch): four TensorFlow imports in all."""

import multiprocessing
import os

import numpy as np
import psutil
import pytest
from batchlab.core import cli
from batchlab.core.analysis.startup import explain_startup
from batchlab.core.model import SweepData
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep import runner as runner_module
from batchlab.core.sweep.runner import SweepRunner, run_sweep
from batchlab.core.training.faults import FAIL_RUN_ENV as TEST_FAIL_RUN_ENV

TINY = {"preset": "mnist-mlp", "samples": 256, "val_samples": 0, "epochs": 1, "device": "cpu"}
FAILING_RUN = 1  # of batch sizes 16, 32, 64: the batch-32 run fails after its run_started, in a live child


def _sweep(path, batch_sizes: str, fail: int | None = None, fork: bool = False):
    spec = build_spec({**TINY, "batch_sizes": batch_sizes})
    if fail is not None:
        os.environ[TEST_FAIL_RUN_ENV] = str(fail)  # the children inherit it
    try:
        assert run_sweep(spec, path, runner=SweepRunner(spec, fork=fork)) == "complete"
    finally:
        os.environ.pop(TEST_FAIL_RUN_ENV, None)
    assert not multiprocessing.active_children()  # the idle child of the last run was let go and reaped
    return path


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """(failing, plain) run files: batch 16, 32, 64 with the batch-32 run failing, then batch 16, 64."""
    folder = tmp_path_factory.mktemp("reuse")
    return _sweep(folder / "failing.h5", "16,32,64", fail=FAILING_RUN), _sweep(folder / "plain.h5", "16,64")


@pytest.fixture(scope="module")
def forked(tmp_path_factory):
    """The failing sweep (batch 16, 32, 64; the batch-32 run fails) with the default children: forked."""
    return _sweep(tmp_path_factory.mktemp("fork") / "forked.h5", "16,32,64", fail=FAILING_RUN, fork=True)


def test_every_run_is_a_process_of_its_own_forked_from_one_import(forked):
    runs = read_run_file(forked).runs
    assert [r.status for r in runs] == ["ok", "error", "ok"]  # the failure lost its run only
    assert [r.attrs["child"] for r in runs] == ["forked"] * 3
    pids = [int(r.attrs["pid"]) for r in runs]
    assert len(set(pids)) == 3 and os.getpid() not in pids
    assert not any(psutil.pid_exists(pid) for pid in pids)  # reaped: no orphan, no zombie
    # the fork is the process start; the server paid the import and the data, once, before the runs
    for run in runs[::2]:
        assert 0 < run.attrs["startup_process_s"] < run.attrs["startup_s"]
        assert run.attrs["startup_import_s"] == run.attrs["startup_data_s"] == run.attrs["startup_prepared_s"] == 0
    # every run starts from the same baseline (a process forked from the same server): the run after a failed
    # one holds what the first held before training, not what the runs before it left
    first, last = runs[0].attrs["rss_before_training_bytes"], runs[2].attrs["rss_before_training_bytes"]
    assert first > 50 << 20 and abs(last - first) < 0.03 * first
    assert runs[2].epochs["rss_peak_bytes"][0] >= last


def test_a_forked_child_trains_exactly_what_a_fresh_child_trains(sweeps, forked):
    fresh, fork = read_run_file(sweeps[0]).runs[2], read_run_file(forked).runs[2]
    assert (fork.batch_size, fork.seed, fresh.attrs["child"]) == (64, 0, "fresh")
    np.testing.assert_allclose(fork.steps["loss"], fresh.steps["loss"], rtol=1e-6)
    np.testing.assert_allclose(fork.epochs["train_loss"], fresh.epochs["train_loss"], rtol=1e-6)
    # and holds what a fresh child holds: the library pages the server's import mapped are mapped in the
    # forked child too (a fork alone leaves ~300 MiB of them out), so its memory figures compare with a fresh one's
    before = fork.attrs["rss_before_training_bytes"], fresh.attrs["rss_before_training_bytes"]
    peak = fork.epochs["rss_peak_bytes"][0], fresh.epochs["rss_peak_bytes"][0]
    assert abs(before[0] - before[1]) < 0.05 * before[1] and abs(peak[0] - peak[1]) < 0.05 * peak[1], (before, peak)
    text = "\n".join(explain_startup(SweepData.from_file(forked).ordered_runs()))
    assert "runs 0, 2 (a forked child: a process of its own, forked from the sweep's fork server)" in text
    assert "by the fork server, before the first run" in text


def test_one_process_trains_runs_until_one_fails_then_a_fresh_one_takes_over(sweeps):
    failing, plain = read_run_file(sweeps[0]).runs, read_run_file(sweeps[1]).runs
    assert [r.status for r in failing] == ["ok", "error", "ok"]
    assert "a failure injected by a test" in failing[FAILING_RUN].message
    # the probe's child took the first run, then the next; after the failure a new process
    assert [r.attrs["child"] for r in failing] == ["probe", "reused", "fresh"]
    assert [r.attrs["child"] for r in plain] == ["probe", "reused"]
    pids = [int(r.attrs["pid"]) for r in failing]
    assert pids[0] == pids[1] != pids[2] and plain[0].attrs["pid"] == plain[1].attrs["pid"]
    # a reused run paid no process start and no import, and kept the data; a fresh one paid them all
    for name in ("startup_process_s", "startup_import_s", "startup_data_s", "startup_prepared_s"):
        assert plain[1].attrs[name] == 0.0
    assert failing[2].attrs["startup_import_s"] > 0 and failing[2].attrs["startup_prepared_s"] == 0.0
    # the probe child's import (with the spec's check) was done before its run was asked for
    assert 0 < plain[0].attrs["startup_prepared_s"] and plain[0].attrs["startup_import_s"] > 0
    # every run's memory is measured in its own epochs, reused or not
    for run in (*plain, failing[2]):
        assert run.epochs["rss_peak_bytes"][0] > 50 << 20
        assert run.attrs["rss_before_training_bytes"] > 50 << 20


def test_a_reused_child_trains_exactly_what_a_fresh_child_trains(sweeps):
    fresh, reused = read_run_file(sweeps[0]).runs[2], read_run_file(sweeps[1]).runs[1]
    assert (reused.batch_size, reused.seed) == (fresh.batch_size, fresh.seed) == (64, 0)
    assert (reused.attrs["child"], fresh.attrs["child"]) == ("reused", "fresh")
    assert len(reused.steps["loss"]) == len(fresh.steps["loss"]) == 4
    np.testing.assert_allclose(reused.steps["loss"], fresh.steps["loss"], rtol=1e-6)
    np.testing.assert_allclose(reused.epochs["train_loss"], fresh.epochs["train_loss"], rtol=1e-6)


def test_the_explanation_names_each_kind_of_child(sweeps):
    text = "\n".join(explain_startup(SweepData.from_file(sweeps[0]).ordered_runs()))
    assert "run 0 (the probe's child" in text
    assert "run 2 (a fresh child" in text
    assert "reused" not in text  # run 2 failed before its first step: no start-up to explain
    text = "\n".join(explain_startup(SweepData.from_file(sweeps[1]).ordered_runs()))
    assert "run 1 (a reused child: the process that trained the run before" in text
    assert "no process start or TensorFlow import" in text


class _Started(Exception):
    pass


def test_reuse_and_fresh_children_on_the_command_line_turn_the_fork_server_off(tmp_path, monkeypatch):
    seen = []

    def fake_run_sweep(spec, out, runner, **kwargs):
        seen.append((runner.fork, runner.reuse))
        raise _Started

    monkeypatch.setattr(runner_module, "run_sweep", fake_run_sweep)  # no child is started
    options = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    for n, extra in enumerate(([], ["--reuse-children"], ["--fresh-children"])):
        with pytest.raises(_Started):
            cli.main(["sweep", *options, "--batch-sizes=16", "--out", str(tmp_path / f"x{n}.h5"), *extra])
    assert seen == [(True, True), (False, True), (False, False)]
