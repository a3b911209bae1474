"""What goes wrong on a Ray cluster (core/sweep/ray_launcher.py): a worker lost mid-run, Stop, a second stop
(kill), and `--ray` where Ray is not installed. The sweeps run on the one local test instance
(tests/core/ray_session.py); faults come through the training child's one test seam (core/training/faults.py),
which a Ray sweep hands to its workers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import psutil
import pytest
from batchlab.core.events import STEPS
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import SweepRunner, run_sweep
from batchlab.core.training.faults import EXIT_RUN_ENV, INPUT_DELAY_ENV

from tests.core.ray_session import TINY_RAY, local_ray

STEP_DELAY_S = "0.3"  # every batch held up this long: a run still trains when the test acts on its first steps


@pytest.fixture
def fault(monkeypatch):
    """Set a fault variable for the next sweep (its Ray workers get it in their runtime environment)."""
    return lambda name, value: monkeypatch.setenv(name, value)


def test_a_worker_lost_mid_run_gives_a_crashed_run_with_its_steps_and_the_sweep_goes_on(tmp_path, fault):
    ray = local_ray()
    fault(EXIT_RUN_ENV, "1:1")  # run 1's worker exits right after it sent the steps up to step 1
    spec = build_spec({**TINY_RAY, "samples": 2048, "batch_sizes": "32,64,128", "ray": "local"})
    out = tmp_path / "lost.h5"
    assert run_sweep(spec, out) == "complete"
    record = read_run_file(out)
    assert [r.status for r in record.runs] == ["ok", "crashed", "ok"]
    lost = record.runs[1]
    # what it streamed before its worker was lost is kept; its epoch never ended
    assert len(lost.steps["loss"]) >= 2 and lost.steps["step"][1] == 1
    assert len(lost.epochs["train_loss"]) == 0
    node_ip = ray.nodes()[0]["NodeManagerAddress"]
    assert lost.attrs["ray_node_ip"] == node_ip
    assert "\n" not in lost.message
    node_id = ray.nodes()[0]["NodeID"][:8]
    assert lost.message.startswith(f"its Ray worker on node {node_ip} (")
    assert f", id {node_id}) was lost mid-run (" in lost.message
    assert any(lost.message in line for line in record.log)  # logged as an error too
    assert len(record.runs[2].epochs["train_loss"]) == 1  # the run after it trained in full


def _stopped_sweep(tmp_path, fault, act) -> tuple:
    """A 4-run sweep whose steps are slow; `act(runner)` once the first steps arrive. (record, launcher, the
    run whose steps came first)."""
    local_ray()
    fault(INPUT_DELAY_ENV, STEP_DELAY_S)
    spec = build_spec({**TINY_RAY, "samples": 512, "batch_sizes": "16,32,64,128", "ray": "local"})
    runner = SweepRunner(spec)
    acted = []

    def sink(event):
        if event["type"] == STEPS and not acted:
            acted.append(event["run"])
            act(runner)

    out = tmp_path / "stopped.h5"
    assert run_sweep(spec, out, sink=sink, runner=runner) == "interrupted"
    assert acted
    return read_run_file(out), runner.launcher, acted[0]


def _all_tasks_ended(launcher) -> bool:
    ray = local_ray()
    refs = [handle.ref for handle in launcher.submitted]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=60)
    return len(ready) == len(refs)


def test_stop_ends_the_runs_in_flight_after_their_step_and_submits_no_more(tmp_path, fault):
    record, launcher, heard = _stopped_sweep(tmp_path, fault, lambda runner: runner.stop())
    assert record.status == "interrupted"
    statuses = [r.status for r in record.runs]
    assert statuses == ["interrupted", "interrupted", "skipped", "skipped"]  # 2 slots: two were in flight
    first = record.runs[heard]  # the run whose first steps the stop followed
    assert len(first.steps["loss"]) >= 1 and first.message == "stopped by the user; measurements so far are kept"
    assert len(launcher.submitted) == 2  # the queued runs were never submitted
    assert _all_tasks_ended(launcher)
    # a clean stop: the worker that trained it lives on for the next sweep's runs
    assert psutil.pid_exists(int(first.attrs["pid"]))


def test_a_second_stop_cancels_the_tasks_and_kills_their_workers(tmp_path, fault):
    def kill(runner):
        runner.stop()
        runner.kill_current()  # the second Ctrl-C

    record, launcher, heard = _stopped_sweep(tmp_path, fault, kill)
    statuses = [r.status for r in record.runs]
    assert statuses == ["interrupted", "interrupted", "skipped", "skipped"]
    first = record.runs[heard]
    assert len(first.steps["loss"]) >= 1  # what it streamed is kept
    assert first.message == "stopped by the user; the training process was ended"
    assert _all_tasks_ended(launcher)
    pid = int(first.attrs["pid"])
    psutil.wait_procs([psutil.Process(pid)] if psutil.pid_exists(pid) else [], timeout=30)
    assert not psutil.pid_exists(pid)  # its worker was killed, not left training


# Ray hidden from import in a fresh interpreter: what a user without the cluster extra sees.
HIDE_RAY = textwrap.dedent(
    """
    import sys

    class NoRay:
        def find_spec(self, name, path=None, target=None):
            if name == "ray" or name.startswith("ray."):
                raise ImportError("No module named 'ray'")
            return None

    sys.meta_path.insert(0, NoRay())
    """
)
NO_RAY = HIDE_RAY + "from batchlab.core import cli\nsys.exit(cli.main(sys.argv[1:]))\n"


def test_the_window_the_cli_and_the_ray_launcher_import_without_ray():
    """The default install has no Ray: nothing imports it until a sweep asks for a cluster."""
    code = HIDE_RAY + textwrap.dedent(
        """
        import batchlab.main, batchlab.gui.main_window, batchlab.core.cli
        import batchlab.core.sweep.ray_launcher, batchlab.core.training.ray_worker
        print("ray" in sys.modules)
        """
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("quiet", [True, False])
def test_ray_without_ray_installed_is_one_line_saying_how_to_install_it(tmp_path, quiet):
    out = tmp_path / "never.h5"
    args = ["sweep", "--preset", "mnist-mlp", "--samples", "256", "--batch-sizes", "16,32", "--epochs", "1"]
    args += ["--ray", "local"]
    args += ["--out", str(out), *(["--quiet"] if quiet else [])]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1"}
    done = subprocess.run([sys.executable, "-c", NO_RAY, *args], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("batchlab:")]
    assert errors == [
        "batchlab: ray: local needs Ray, which is not installed here: pip install 'batchlab[cluster]' (or leave "
        "ray empty to train on this machine)"
    ]
    assert "Traceback" not in done.stderr and done.stderr.splitlines()[-1] == errors[0]
    if quiet:
        assert done.stderr.splitlines() == errors
    assert not out.exists()  # no file for a sweep that never started
