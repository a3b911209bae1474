"""Placement settings (core/settings/placement.py): how many runs at once and where, as the user types them."""

from __future__ import annotations

import pytest
from batchlab.core.errors import SpecError
from batchlab.core.settings.placement import parallel_runs, parse_parallel, parse_ray, parse_ray_cpus
from batchlab.core.spec import build_spec, spec_errors

MLP = {"workload": "mlp", "batch_sizes": "16,32", "epochs": 1, "samples": 256}


@pytest.mark.parametrize(
    ("typed", "parsed", "runs"), [("", "", 1), ("1", "", 1), ("gpus", "gpus", None), (" 3 ", "3", 3), ("off", "", 1)]
)
def test_parallel_is_one_at_a_time_gpus_or_a_number(typed, parsed, runs):
    assert parse_parallel(typed) == parsed
    assert parallel_runs(parsed) == runs


@pytest.mark.parametrize("bad", ["0", "65", "many", "2.5"])
def test_a_bad_parallel_says_what_is_allowed(bad):
    with pytest.raises(SpecError, match="parallel must be gpus .* or a number of runs at once from 1 to 64"):
        parse_parallel(bad)


def test_ray_addresses():
    assert parse_ray(" Auto ") == "auto" and parse_ray("local") == "local" and parse_ray("") == ""
    assert parse_ray("ray://head.lab:10001") == "ray://head.lab:10001"
    for bad in ("ray://head", "http://x:1", "yes"):
        with pytest.raises(SpecError, match="ray must be auto .*, local .* or ray://host:port"):
            parse_ray(bad)
    assert parse_ray_cpus("0.5") == 0.5 and parse_ray_cpus("") == 1.0
    with pytest.raises(SpecError, match="ray_cpus must be a number of CPUs per run above 0"):
        parse_ray_cpus("0")


def test_the_spec_refuses_parallel_with_ray_and_gpus_on_a_cpu():
    assert build_spec({**MLP, "parallel": "2"}).parallel == "2"
    both = spec_errors({**MLP, "parallel": "2", "ray": "local"})
    assert "Ray decides how many runs train at once" in str(both["parallel"])
    on_cpu = spec_errors({**MLP, "parallel": "gpus", "device": "cpu"})
    assert "gpus is not allowed with device cpu" in str(on_cpu["parallel"])
    assert build_spec(MLP).parallel == "" and build_spec(MLP).ray == ""
