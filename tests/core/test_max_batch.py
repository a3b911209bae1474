"""`batchlab max-batch` for real: tries in child processes, the data's size as a limit, the host memory cap."""

import pytest
from batchlab.core.errors import SpecError
from batchlab.core.sweep.max_batch import DEFAULT_CAP_FRACTION, parse_memory_cap

from tests.core.test_cli import assert_one_line_error, batchlab

SMALL = ["--preset", "mnist-mlp", "--samples", "256", "--val-samples", "64", "--device", "cpu"]


def test_when_the_data_is_the_limit_the_answer_is_the_data_size_verified():
    result = batchlab("max-batch", *SMALL, "--start", "128")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0].split() for line in lines if line.startswith("  ")] == [
        ["try", "batch", "128"],
        ["try", "batch", "256"],
        ["verify", "batch", "256"],
    ]
    assert "max batch: 256 (all 256 samples fit in one batch; memory is not the limit; verified" in result.stdout
    assert not any("batch" in line and "512" in line for line in lines)  # never more samples than the data


def test_a_try_over_the_host_memory_cap_is_ended_not_left_to_the_oom_killer():
    # TensorFlow alone needs several hundred MiB, so a 100 MiB cap ends every try: none fits.
    result = batchlab("max-batch", *SMALL, "--start", "2", "--max", "2", "--memory-cap", "100MiB")
    assert result.returncode == 1, result.stderr
    assert "batch       2: does not fit: over the host memory cap" in result.stdout
    assert "batch       1: does not fit: over the host memory cap" in result.stdout
    assert "even batch 1 does not fit on this device within 100 MiB" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args, field",
    [
        (["--margin", "1.5"], "margin"),
        (["--start", "0"], "start"),
        (["--max", "257"], "max"),  # more than the 256 training samples
        (["--memory-cap", "lots"], "memory_cap"),
    ],
)
def test_bad_options_are_one_line(args, field):
    assert_one_line_error(batchlab("max-batch", *SMALL, *args), field)


def test_memory_cap_sizes_and_shares():
    available = 8 << 30
    assert parse_memory_cap(None, available) == int(DEFAULT_CAP_FRACTION * available)
    assert parse_memory_cap("50%", available) == 4 << 30
    assert parse_memory_cap("6GiB", available) == 6 << 30
    assert parse_memory_cap("512 MiB", available) == 512 << 20
    assert parse_memory_cap("2GB", available) == 2_000_000_000
    for bad in ("0%", "150%", "12 parsecs", "1KiB"):
        with pytest.raises(SpecError, match="memory_cap"):
            parse_memory_cap(bad, available)


def test_a_failure_above_a_size_that_trained_counts_as_not_fitting_but_not_at_the_first(monkeypatch):
    from batchlab.core.analysis.batch_search import Trial, find_max_batch
    from batchlab.core.spec import build_spec
    from batchlab.core.sweep.max_batch import BatchProber, MaxBatchError

    def fake_try(self, b, verify):  # cuDNN-style failure above 100 samples, worded without "out of memory"
        if b > 100:
            raise MaxBatchError(f"batch {b}: Failed to get convolution algorithm")
        return Trial(b, True, verify, peak_bytes=b)

    monkeypatch.setattr(BatchProber, "_try", fake_try)
    spec = build_spec({"preset": "mnist-mlp", "samples": 1000, "batch_sizes": "8", "device": "cpu"})
    result = find_max_batch(BatchProber(spec, cap_bytes=1 << 30), limit=1000, start=8)
    assert 90 <= result.batch_size <= 100 and result.verification is not None
    failed = [t for t in result.trials if not t.ok]
    assert failed and all("Failed to get convolution algorithm" in t.message for t in failed)
    with pytest.raises(MaxBatchError):  # the first size failing is not a limit but a problem to report
        find_max_batch(BatchProber(spec, cap_bytes=1 << 30), limit=1000, start=128)
