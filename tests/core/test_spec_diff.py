"""The settings in which compared sweeps differ, from specs as run files store them."""

from __future__ import annotations

from batchlab.core.spec import build_spec
from batchlab.core.spec_diff import differences_text, flat_settings, spec_differences


def test_one_epoch_against_ten_epochs_with_another_optimizer():
    a = build_spec({"preset": "mnist-autoencoder", "epochs": 1}).to_dict()
    b = build_spec({"preset": "mnist-autoencoder", "epochs": 10, "optimizer": "sgd", "lr": 0.05}).to_dict()
    diff = spec_differences({"a.h5": a, "b.h5": b})
    assert list(diff) == ["epochs", "optimizer", "lr"]
    assert diff["epochs"] == {"a.h5": 1, "b.h5": 10}
    assert diff["optimizer"] == {"a.h5": "adam", "b.h5": "sgd"}
    lines = differences_text(diff)
    assert lines == ["a.h5: epochs 1, optimizer adam, lr 0.001", "b.h5: epochs 10, optimizer sgd, lr 0.05"]


def test_identical_specs_or_a_single_one_differ_in_nothing():
    a = build_spec({"preset": "mnist-mlp"}).to_dict()
    assert spec_differences({"a": a, "b": dict(a)}) == {}
    assert spec_differences({"a": a, "b": {}}) == {}
    assert differences_text({}) == []


def test_lists_and_blank_values_read_as_a_person_would():
    a = build_spec({"preset": "mnist-mlp", "batch_sizes": "8, 16", "lr": ""}).to_dict()
    b = build_spec({"preset": "mnist-mlp", "batch_sizes": "8, 32"}).to_dict()
    lines = differences_text(spec_differences({"x": a, "y": b}))
    assert lines == ["x: lr default, batch_sizes 8, 16", "y: lr 0.001, batch_sizes 8, 32"]


def test_budget_flattens_to_epochs():
    assert flat_settings({"budget": {"unit": "epochs", "amount": 3}, "out": "x.h5"}) == {"epochs": 3}


def test_a_setting_a_file_from_before_it_lacks_counts_as_its_default():
    new = build_spec({}).to_dict()
    old = {k: v for k, v in new.items() if k != "abort_losers"}
    assert spec_differences({"old": old, "new": new}) == {}
    assert spec_differences({"old": old, "new": {**new, "abort_losers": True}}) == {
        "abort_losers": {"old": False, "new": True}
    }
