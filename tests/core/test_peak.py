"""The matmul peak: measured in a child, cached per device in the user's cache folder, shown by `info`."""

import json

from batchlab.core.sweep import peak

from tests.core.test_cli import assert_one_line_error, batchlab


def test_info_peak_measures_caches_and_shows_the_peak(tmp_path):
    env = {"BATCHLAB_CACHE_DIR": str(tmp_path / "cache")}
    result = batchlab("info", "--peak", "--device", "cpu", env=env)
    assert result.returncode == 0, result.stderr
    cached = json.loads((tmp_path / "cache" / "matmul_peak.json").read_text())["peaks"]
    (description, entry), *others = cached.items()
    assert not others and description.startswith("cpu: ")
    assert entry["flops_per_s"] > 1e8 and entry["dtype"] == "float32"
    assert f"on {description}" in result.stdout and str(tmp_path / "cache") in result.stdout
    shown = batchlab("info", env=env)
    assert f"GFLOP/s on {description}" in shown.stdout


def test_bad_device_for_the_peak_is_one_line(tmp_path):
    result = batchlab("info", "--peak", "--device", "tpu", env={"BATCHLAB_CACHE_DIR": str(tmp_path)})
    assert_one_line_error(result, "device", "tpu")


def test_the_cache_keeps_one_entry_per_device_and_survives_a_corrupt_file(tmp_path, monkeypatch):
    monkeypatch.setenv(peak.CACHE_ENV, str(tmp_path))
    assert peak.cached_peak("cpu: X") is None
    peak.store_peak({"device_description": "cpu: X", "flops_per_s": 3e10})
    peak.store_peak({"device_description": "gpu:0: Y", "flops_per_s": 5e13})
    peak.store_peak({"device_description": "cpu: X", "flops_per_s": 4e10})  # re-measured
    assert peak.cached_peak("cpu: X") == 4e10 and peak.cached_peak("gpu:0: Y") == 5e13
    peak.cache_path().write_text("{not json")
    assert peak.cached_peak("cpu: X") is None  # unreadable: no utilisation claimed, no crash
