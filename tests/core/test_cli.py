"""The command line as a user runs it: one clear line and exit code 2 for every mistake."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.core.helpers import save_keras_model

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "--preset",
    "mnist-mlp",
    "--samples",
    "128",
    "--val-samples",
    "32",
    "--epochs",
    "1",
    "--device",
    "cpu",
    "--batch-sizes",
    "32",
]


def batchlab(*args, env=None, timeout=300):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, str(REPO / "main.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=REPO,
    )


PROGRESS_NOTE = "checking data and model"


def assert_one_line_error(result, *phrases):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    # Errors found by the TensorFlow probe follow the one progress note that announced it.
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith(PROGRESS_NOTE)]
    assert len(lines) == 1, result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


@pytest.fixture
def data_files(tmp_path):
    files = {}
    rng = np.random.default_rng(0)
    files["corrupt"] = tmp_path / "corrupt.npz"
    files["corrupt"].write_bytes(b"PK\x03\x04 this is not a zip archive" * 10)
    files["flat"] = tmp_path / "flat.npz"
    np.savez(files["flat"], x_train=rng.random(100), y_train=np.zeros(100))
    files["negative"] = tmp_path / "negative.npz"
    np.savez(files["negative"], x_train=rng.random((100, 8, 8)), y_train=-np.ones(100, dtype="int64"))
    files["nan"] = tmp_path / "nan.npz"
    x = rng.random((100, 8, 8))
    x[3, 3, 3] = np.nan
    np.savez(files["nan"], x_train=x, y_train=np.zeros(100, dtype="int64"))
    return files


@pytest.mark.parametrize(
    ("args", "phrases"),
    [
        (["--batch-sizes", "0"], ["batch_sizes", "too small"]),
        (["--batch-sizes", "32,x"], ["batch_sizes", "'x' is not an integer"]),
        (["--batch-sizes", "256"], ["batch_sizes", "larger than the 128 training samples"]),
        (["--preset", "nope"], ["preset", "mnist-autoencoder"]),
        (["--optimizer", "lion"], ["optimizer", "adam"]),
        (["--data", "missing.npz"], ["data", "does not exist"]),
        (["--out", "/nonexistent-dir/x.h5"], ["out", "does not exist"]),
        (["--out", "results.csv"], ["out", ".h5"]),
        (["--epochs"], ["expected one argument"]),
    ],
)
def test_bad_options_give_one_line_and_exit_2(args, phrases):
    assert_one_line_error(batchlab("sweep", *TINY, *args), *phrases)


@pytest.mark.parametrize(
    ("name", "phrases"),
    [
        ("corrupt", ["corrupt.npz"]),
        ("flat", ["flat.npz", "x_train"]),
        ("negative", ["negative.npz", "negative"]),
        ("nan", ["nan.npz", "NaN"]),
    ],
)
def test_bad_data_files_give_one_line_and_exit_2(data_files, name, phrases):
    # the mlp sized from the data (mnist-mlp would refuse samples that are not 784 values first)
    args = ["--preset", "mlp", "--samples", "50", "--batch-sizes", "10", "--data", data_files[name]]
    result = batchlab("sweep", *TINY, *args)
    assert_one_line_error(result, "data", *phrases)
    assert PROGRESS_NOTE not in result.stderr  # the data is checked here, before TensorFlow starts


def test_home_paths_are_expanded_and_ignored_validation_is_said(tmp_path):
    rng = np.random.default_rng(0)
    # no x_test: the 32 validation samples asked for cannot be had
    np.savez(
        tmp_path / "train_only.npz",
        x_train=rng.integers(0, 256, (128, 28, 28), dtype=np.uint8),
        y_train=rng.integers(0, 10, 128),
    )
    result = batchlab("sweep", *TINY, "--data", "~/train_only.npz", "--out", "~/x.h5", env={"HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "warning: val_samples=32 is ignored" in result.stderr and "no test split" in result.stderr
    from batchlab.core.runfile.reader import read_run_file

    record = read_run_file(tmp_path / "x.h5")
    assert record.runs[0].status == "ok"
    assert record.spec["data"] == str(tmp_path / "train_only.npz")
    assert any("warning" in line and "val_samples=32 is ignored" in line for line in record.log)


def test_existing_output_is_never_overwritten_unless_asked(tmp_path):
    out = tmp_path / "keep.h5"
    out.write_bytes(b"precious")
    assert_one_line_error(batchlab("sweep", *TINY, "--out", out), "already exists", "--overwrite")
    assert out.read_bytes() == b"precious"


def test_a_model_that_does_not_fit_the_data_is_refused_before_training(tmp_path):
    model = save_keras_model(
        """
        inputs = keras.Input((32, 32, 3))
        model = keras.Model(inputs, keras.layers.Dense(10)(keras.layers.Flatten()(inputs)))
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        """,
        tmp_path / "cifar_shaped.keras",
    )
    result = batchlab(
        "sweep",
        "--preset",
        "keras-file",
        "--model",
        model,
        "--samples",
        "64",
        "--batch-sizes",
        "32",
        "--out",
        tmp_path / "x.h5",
    )
    assert_one_line_error(result, "data", "(28, 28)", "(32, 32, 3)")
    assert not (tmp_path / "x.h5").exists()


def test_an_uncached_keras_dataset_offline_names_the_alternatives(tmp_path):
    # An unreachable proxy makes the download fail at once, as it does on a machine without network.
    env = {"KERAS_HOME": str(tmp_path), "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    result = batchlab("sweep", *TINY, "--data", "keras:mnist", "--out", tmp_path / "x.h5", env=env)
    assert_one_line_error(result, "keras:mnist" if "keras:mnist" in result.stderr else "mnist", "bundled")


def test_sweep_then_report_print_the_same_table(tmp_path):
    out = tmp_path / "tiny.h5"
    result = batchlab("sweep", *TINY, "--batch-sizes", "16,64", "--out", out, "--quiet")
    assert result.returncode == 0, result.stderr
    table, explanation = result.stdout.split("\n", 1)[1].strip().split("\n\n", 1)  # after the "run file:" line
    assert table.splitlines()[0].split()[:3] == ["batch", "seed", "final"]
    assert [line.split()[0] for line in table.splitlines()[1:]] == ["16", "64"]
    assert all(line.rstrip().endswith("ok") for line in table.splitlines()[1:])
    report = batchlab("report", out)
    assert report.returncode == 0
    assert table in report.stdout
    assert explanation.startswith("Why the times and memory came out this way:") and explanation in report.stdout


def test_report_of_a_file_that_is_not_a_run_file(tmp_path):
    bogus = tmp_path / "notes.h5"
    bogus.write_text("hello")
    assert_one_line_error(batchlab("report", bogus), "file", "notes.h5")


def test_info_and_presets():
    info = batchlab("info")
    assert info.returncode == 0, info.stderr
    assert "tensorflow_version" in info.stdout and "cpu" in info.stdout
    presets = batchlab("presets")
    assert "mnist-autoencoder" in presets.stdout and "batch_sizes=8,16,32,64,128,256,512" in presets.stdout


def test_every_subcommand_runs_headless_and_does_not_open_the_window(capsys):
    """main.py routes only the names it lists to the CLI; `batchlab profile` once opened the window instead."""
    from batchlab.core.cli import COMMANDS, _command_modules
    from batchlab.main import CLI_COMMANDS, main

    assert set(COMMANDS) | {m.NAME for m in _command_modules()} <= set(CLI_COMMANDS)
    with pytest.raises(SystemExit) as exit_info:
        main(["profile", "--help"])
    assert exit_info.value.code == 0 and "usage: batchlab profile" in capsys.readouterr().out


def test_ctrl_c_ends_the_run_cleanly_and_keeps_what_was_measured(tmp_path):
    import signal

    from batchlab.core.runfile.reader import read_run_file

    out = tmp_path / "interrupted.h5"
    proc = _start_sweep(*TINY, "--samples", "4096", "--epochs", "50", "--batch-sizes", "8,16", "--out", out)
    _wait_for_first_epoch(out, proc)
    os.killpg(proc.pid, signal.SIGINT)  # the terminal sends Ctrl-C to the parent and the child
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    record = read_run_file(out)
    assert record.status == "interrupted"
    first, second = record.runs
    assert first.status == "interrupted" and second.status == "skipped"
    assert first.epochs["epoch"].size >= 1 and first.steps["loss"].size > first.epochs["epoch"].size
    assert "interrupted" in stdout  # the final table still prints


def _start_sweep(*args):
    return subprocess.Popen(
        [sys.executable, str(REPO / "main.py"), "sweep", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        start_new_session=True,  # its own process group, like a terminal's foreground job
    )


def _wait_for_first_epoch(out: Path, proc) -> None:
    import time

    from batchlab.core.runfile.reader import read_run_file

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
        if out.exists():
            try:
                runs = read_run_file(out).runs
            except Exception:
                continue
            if runs and len(runs[0].epochs.get("epoch", ())) >= 1:
                return
    raise AssertionError("the sweep never finished an epoch")


def _ignores_sigint(pid: int) -> bool:
    """True once a process has set SIGINT to ignored (bit 2 of SigIgn in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigIgn:"))
    return bool(mask & (1 << (2 - 1)))


def test_ctrl_c_twice_kills_the_run_without_a_deadlock(tmp_path):
    import signal
    import time

    from batchlab.core.runfile.reader import read_run_file

    out = tmp_path / "killed.h5"
    proc = _start_sweep(*TINY, "--samples", "4096", "--epochs", "50", "--batch-sizes", "8,16", "--out", out)
    _wait_for_first_epoch(out, proc)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.2)  # a second press soon after the first, while the first is being handled
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)  # a deadlock would hang here
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "Ctrl-C again to kill it" in stderr and "killing the current run" in stderr
    record = read_run_file(out)
    assert record.status == "interrupted"
    assert [r.status for r in record.runs] == ["interrupted", "skipped"]
    assert record.runs[0].steps["loss"].size > 0


def test_ctrl_c_while_tensorflow_starts_ends_the_sweep_at_once(tmp_path):
    import signal
    import time

    import psutil
    from batchlab.core.runfile.reader import read_run_file

    out = tmp_path / "early.h5"
    proc = _start_sweep(*TINY, "--batch-sizes", "16,32", "--out", out)
    assert PROGRESS_NOTE in proc.stderr.readline()  # the probe child starts TensorFlow now
    deadline = time.monotonic() + 60
    probe = None
    while probe is None and time.monotonic() < deadline:  # until the probe child ignores Ctrl-C itself
        time.sleep(0.05)
        for child in psutil.Process(proc.pid).children():
            try:
                if "spawn_main" in " ".join(child.cmdline()) and _ignores_sigint(child.pid):
                    probe = child
            except psutil.Error:
                pass
    assert probe is not None, "no probe child seen"
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert not probe.is_running() or probe.status() == psutil.STATUS_ZOMBIE
    record = read_run_file(out)
    assert record.status == "interrupted" and "before the first run" in record.message
    assert [r.status for r in record.runs] == ["skipped", "skipped"]
