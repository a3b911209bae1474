"""batchlab bench (the suite's file records the machine and its version) and batchlab compare (ratios and the
noise rule against a hand computation, the version refusal) on real and synthetic run files."""

from __future__ import annotations

import json
import math

import psutil
import pytest
from batchlab.core.bench.compare import DEFAULT_THRESHOLD, cell_text, compare_benches, format_comparison
from batchlab.core.bench.machine import cpu_model, nvidia_gpus, parse_nvidia_smi
from batchlab.core.bench.suite import QUICK_SUITE_NAME, SUITE_VERSION
from batchlab.core.cli import main
from batchlab.core.runfile.reader import read_run_file

from tests.core.bench_files import write_bench

MIB = 1 << 20


def _run(batch, seed, dt, memory=500 * MIB, startup=2.0, step_time=0.004):
    return dict(batch_size=batch, seed=seed, dt=dt, step_time=step_time, memory=memory, startup=startup)


def test_quick_bench_file_records_the_suite_and_the_machine_and_opens_in_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BATCHLAB_CACHE_DIR", str(tmp_path / "cache"))  # no cached matmul peak: recorded as NaN
    out = tmp_path / "bench"
    assert main(["bench", "--quick", "--workloads", "mlp", "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["mlp.h5"]
    record = read_run_file(out / "mlp.h5")
    root = record.attrs
    assert (root["bench_suite"], root["bench_suite_version"], root["bench_workload"]) == (
        QUICK_SUITE_NAME,
        SUITE_VERSION,
        "mlp",
    )
    assert root["machine_cpu_model"] == cpu_model()
    assert root["machine_cpu_threads"] >= root["machine_cpu_cores"] == (psutil.cpu_count(logical=False) or 0)
    assert root["machine_memory_bytes"] == psutil.virtual_memory().total
    gpus = nvidia_gpus()  # the machine's GPUs, whatever CUDA_VISIBLE_DEVICES hides from TensorFlow; [] here
    assert json.loads(root["machine_gpus"]) == gpus and root["machine_gpu_count"] == len(gpus)
    import importlib.metadata

    assert root["tensorflow_version"] == importlib.metadata.version("tensorflow")
    assert root["cuda_version"] and root["cudnn_version"]
    assert math.isnan(root["matmul_peak_flops_per_s"]) and root["matmul_peak_device"] == ""
    assert [(r.batch_size, r.status) for r in record.runs] == [(16, "ok"), (64, "ok")]
    capsys.readouterr()
    assert main(["report", str(out / "mlp.h5")]) == 0  # an ordinary sweep file for report (and the window)
    printed = capsys.readouterr().out
    assert "sweep complete" in printed
    # report names the suite and the machine the numbers belong to, as compare does for each side
    assert f"benchmark: {QUICK_SUITE_NAME} v{SUITE_VERSION}, workload mlp; --repeats" in printed
    machine = next(line for line in printed.splitlines() if line.startswith("machine: "))
    assert cpu_model() in machine and "matmul peak not measured" in printed


def test_bench_records_the_cached_matmul_peak_of_its_device(tmp_path, monkeypatch):
    from batchlab.core.bench.suite import peak_attrs
    from batchlab.core.commands.bench import _peak
    from batchlab.core.sweep.peak import store_peak

    monkeypatch.setenv("BATCHLAB_CACHE_DIR", str(tmp_path))
    store_peak({"device_description": "cpu: test CPU", "flops_per_s": 6.0e10, "dtype": "float32"})
    found = peak_attrs(_peak("auto", measure=False)({"device_description": "cpu: test CPU"}))
    assert found["matmul_peak_flops_per_s"] == 6.0e10 and found["matmul_peak_device"] == "cpu: test CPU"
    missing = peak_attrs(_peak("auto", measure=False)({"device_description": "cpu: another CPU"}))
    assert math.isnan(missing["matmul_peak_flops_per_s"])


def test_nvidia_smi_rows_give_name_memory_driver_and_compute_capability():
    text = "NVIDIA H200, 143771, 570.124.06, 9.0\nNVIDIA A100-SXM4-40GB, 40960, 570.124.06, 8.0\n"
    assert parse_nvidia_smi(text) == [
        {"name": "NVIDIA H200", "memory_bytes": 143771 * MIB, "driver": "570.124.06", "compute_capability": "9.0"},
        {
            "name": "NVIDIA A100-SXM4-40GB",
            "memory_bytes": 40960 * MIB,
            "driver": "570.124.06",
            "compute_capability": "8.0",
        },
    ]


def test_compare_with_repeats_gives_ratios_and_spread_by_hand(tmp_path, capsys):
    # batch 16: A 1600 and 1280 samples/s, B 3200 and 2560: B/A = 2880/1440 = 2.0, spread 2560/1600 = 1.6 to
    # 3200/1280 = 2.5, every B above every A: beyond the noise.
    # batch 64: A 3200 and 2560, B 64/0.021 = 3047.6 and 64/0.024 = 2666.7: ranges overlap, within the noise.
    a = write_bench(
        tmp_path / "a.h5", [_run(16, 0, 0.010), _run(16, 1, 0.0125), _run(64, 0, 0.020), _run(64, 1, 0.025)]
    )
    b_runs = [_run(16, 0, 0.005), _run(16, 1, 0.00625), _run(64, 0, 0.021), _run(64, 1, 0.024)]
    b_runs[0]["memory"] = b_runs[1]["memory"] = 600 * MIB  # batch 16: peak memory 1.2x, the same in both repeats
    b = write_bench(tmp_path / "b.h5", b_runs)
    comparison = compare_benches(a, b)
    rows = {r.batch_size: r for r in comparison.rows}
    t16, t64 = rows[16].cells["samples_per_s"], rows[64].cells["samples_per_s"]
    assert t16.ratio == pytest.approx(2.0) and (t16.low, t16.high) == (pytest.approx(1.6), pytest.approx(2.5))
    assert t16.beyond and t16.rule == "spread" and cell_text(t16) == "2.00 [1.60-2.50] *"
    expected = (64 / 0.021 + 64 / 0.024) / 2 / ((3200 + 2560) / 2)
    assert t64.ratio == pytest.approx(expected) and not t64.beyond
    assert cell_text(t64) == f"{expected:.2f} [{64 / 0.024 / 3200:.2f}-{64 / 0.021 / 2560:.2f}]"
    memory = rows[16].cells["peak_memory"]
    assert memory.ratio == pytest.approx(1.2) and memory.beyond  # 600 MiB twice against 500 MiB twice
    assert rows[16].cells["one_time"].ratio == pytest.approx(1.0) and not rows[16].cells["one_time"].beyond
    text = format_comparison(comparison)
    assert (
        "mlp: B's throughput is 0.99x to 2.00x A's; beyond the noise at 1 of 2 batch sizes (1 higher, 0 lower)" in text
    )
    assert "repeats' ranges do not overlap" in text
    assert main(["compare", str(a), str(b), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert (row["batch_size"], row["samples_per_s"]["ratio"], row["samples_per_s"]["beyond_noise"]) == (
        16,
        pytest.approx(2.0),
        True,
    )
    assert row["samples_per_s"]["spread"] == [pytest.approx(1.6), pytest.approx(2.5)]


def test_compare_without_repeats_uses_the_stated_threshold(tmp_path):
    # one run a side: batch 16 B/A = 0.010/0.0108 = 0.926 (7.4% off, within 10%); batch 64 = 0.020/0.0178 = 1.124
    a = write_bench(tmp_path / "a.h5", [_run(16, 0, 0.0108), _run(64, 0, 0.0178)])
    b = write_bench(tmp_path / "b.h5", [_run(16, 0, 0.010), _run(64, 0, 0.020)])
    rows = {r.batch_size: r for r in compare_benches(b, a).rows}  # ratios are B/A of the arguments' order
    assert rows[16].cells["samples_per_s"].ratio == pytest.approx(0.010 / 0.0108)
    assert rows[64].cells["samples_per_s"].ratio == pytest.approx(0.020 / 0.0178)
    assert not rows[16].cells["samples_per_s"].beyond and rows[64].cells["samples_per_s"].beyond
    assert {c.rule for c in rows[16].cells.values()} == {"threshold"}
    assert not compare_benches(b, a, threshold=0.15).rows[1].cells["samples_per_s"].beyond  # 12.4% < 15%
    text = format_comparison(compare_benches(b, a))
    assert "* means the ratio is more than 10% from 1 (the default threshold; --threshold changes it)" in text
    assert "more than 12.5% from 1 (--threshold)" in format_comparison(compare_benches(b, a, threshold=0.125))
    assert "0.93" in text and "1.12 *" in text


def test_compare_refuses_different_suite_versions_in_one_line_unless_forced(tmp_path, capsys):
    a = write_bench(tmp_path / "a.h5", [_run(16, 0, 0.01)])
    b = write_bench(tmp_path / "b.h5", [_run(16, 0, 0.01)], version=SUITE_VERSION + 1)
    assert main(["compare", str(a), str(b)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"batchlab: suite: {a} is batchlab-bench version 1 but {b} is batchlab-bench")
    assert "--force" in captured.err and "Traceback" not in captured.err
    assert main(["compare", str(a), str(b), "--force"]) == 0
    assert "compared anyway, --force" in capsys.readouterr().out


def test_compare_refuses_a_sweep_that_is_not_a_benchmark(tmp_path, capsys):
    from batchlab.core.runfile import RunFileWriter

    from tests.gui.synthetic import sweep_events

    plain = tmp_path / "sweep.h5"
    writer = RunFileWriter(plain)
    for event in sweep_events():
        writer.handle(event)
    writer.close()
    a = write_bench(tmp_path / "a.h5", [_run(16, 0, 0.01)])
    assert main(["compare", str(a), str(plain)]) == 2
    assert "is not a benchmark file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--workloads", "resnet"], "workloads"),
        (["--repeats", "0"], "repeats"),
        (["--threads", "two"], "threads"),
    ],
)
def test_bench_refuses_bad_options_in_one_line_before_running_anything(tmp_path, capsys, args, field):
    out = tmp_path / "bench"
    assert main(["bench", "--quick", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"batchlab: {field}: ") and err.count("\n") == 1
    assert not (out / "mlp.h5").exists()


def test_no_ratio_of_a_value_that_is_not_positive():
    """A fitted step-time alpha below 0 (noise at small batches): -7.7 ms / -1.0 ms = 7.7 would claim a change."""
    from batchlab.core.bench.compare import compare_cell

    cell = compare_cell([-0.0077], [-0.0010], DEFAULT_THRESHOLD)
    assert math.isnan(cell.ratio) and not cell.beyond and cell_text(cell) == "n/a"
    assert cell_text(compare_cell([0.004], [0.002], DEFAULT_THRESHOLD)) == "0.50 *"


def test_a_small_difference_beyond_the_noise_shows_the_digits_that_make_it():
    """Peak memory barely varies between repeats: 0.6% more in every repeat is beyond their spread, and 2 decimals
    would show its low end as 1.00."""
    from batchlab.core.bench.compare import compare_cell

    cell = compare_cell([500.0, 501.0], [503.0, 504.0], DEFAULT_THRESHOLD)  # 503.5/500.5, 503/501, 504/500
    assert cell.beyond and cell_text(cell) == "1.006 [1.004-1.008] *"
    assert cell_text(compare_cell([500.0, 501.0], [506.0, 507.0], DEFAULT_THRESHOLD)) == "1.01 [1.01-1.01] *"
    assert cell_text(compare_cell([500.0, 501.0], [500.5, 502.0], DEFAULT_THRESHOLD)) == "1.00 [1.00-1.00]"
