"""The spec: the one validation path the CLI and the window share."""

import json

import numpy as np
import pytest
from batchlab.core.presets import PRESETS
from batchlab.core.spec import (
    SEED_LIMIT,
    RunSpec,
    SpecError,
    SweepSpec,
    build_spec,
    preset_values,
    spec_errors,
    with_overrides,
)


def test_default_preset_reproduces_the_autoencoder_experiment():
    spec = build_spec({"preset": "mnist-autoencoder"})
    assert spec.workload == "autoencoder"
    assert spec.samples == 5000
    assert spec.epochs == 10
    assert spec.batch_sizes == (8, 16, 32, 64, 128, 256, 512)
    assert spec.shuffle is False  # the experiment took batches as consecutive slices
    assert [r.batch_size for r in spec.runs()] == [8, 16, 32, 64, 128, 256, 512]


def test_every_preset_builds():
    for name in PRESETS:
        values = {"preset": name}
        if PRESETS[name].defaults["workload"] == "keras-file":
            with pytest.raises(SpecError) as e:
                build_spec(values)
            assert e.value.field == "model_file"
        else:
            assert build_spec(values).preset == name


def test_strings_from_a_form_or_command_line_are_parsed():
    spec = build_spec({"batch_sizes": "32, 64;128", "seeds": "0,1", "epochs": "3", "lr": "0.01", "shuffle": "yes"})
    assert spec.batch_sizes == (32, 64, 128)
    assert spec.seeds == (0, 1)
    assert spec.epochs == 3 and spec.lr == 0.01 and spec.shuffle is True
    # seed-major order: the first pass covers every batch size
    assert [(r.seed, r.batch_size) for r in spec.runs()][:4] == [(0, 32), (0, 64), (0, 128), (1, 32)]


@pytest.mark.parametrize(
    ("values", "field", "phrase"),
    [
        ({"batch_sizes": "0"}, "batch_sizes", "too small"),
        ({"batch_sizes": "-8"}, "batch_sizes", "too small"),
        ({"batch_sizes": "12.5"}, "batch_sizes", "not an integer"),
        ({"batch_sizes": "abc"}, "batch_sizes", "not an integer"),
        ({"batch_sizes": "8,8"}, "batch_sizes", "listed twice"),
        ({"batch_sizes": ""}, "batch_sizes", "no values"),
        ({"batch_sizes": "8,1024", "samples": "512"}, "batch_sizes", "larger than the 512 training samples"),
        ({"preset": "resnet"}, "preset", "choose one of"),
        ({"optimizer": "lion"}, "optimizer", "choose one of adam"),
        ({"optimizer": "model"}, "optimizer", "only works with a .keras model file"),
        ({"lr": "-1"}, "lr", "number > 0"),
        ({"lr": "fast"}, "lr", "not a number"),
        ({"epochs": "0"}, "epochs", ">= 1"),
        ({"samples": "1e3"}, "samples", "not an integer"),
        ({"momentum": "1.5"}, "momentum", "out of range"),
        ({"device": "tpu"}, "device", "auto, cpu or gpu:N"),
        ({"data": "keras:imagenet"}, "data", "keras:mnist"),
        ({"data": "/nonexistent/x.npz"}, "data", "does not exist"),
        ({"data": "data.csv"}, "data", ".npz/.h5"),
        ({"workload": "keras-file"}, "model_file", "needs a .keras model file"),
        ({"workload": "keras-file", "model_file": "model.h5"}, "model_file", "not a .keras file"),
        ({"unknown": 1}, "unknown", "unknown setting"),
        ({"seeds": str(2**32)}, "seeds", "from 0 to 4294967295"),
        ({"seeds": "0,-1"}, "seeds", "too small"),
    ],
)
def test_bad_values_name_the_field_and_what_is_allowed(values, field, phrase):
    with pytest.raises(SpecError) as e:
        build_spec(values)
    assert e.value.field == field
    assert phrase in str(e.value)
    assert str(e.value).startswith(f"{field}: ")
    assert "\n" not in str(e.value)
    # the window asks for all errors at once and shows the same message beside the field
    error = spec_errors(values)[field]
    assert isinstance(error, SpecError) and error.field == field
    assert error.message == e.value.message and phrase in error.message
    assert not error.message.startswith(f"{field}:")  # the message itself does not repeat the field


def test_spec_errors_reports_every_bad_field():
    errors = spec_errors({"batch_sizes": "0", "lr": "x", "epochs": "-1"})
    assert set(errors) == {"batch_sizes", "lr", "epochs"}
    assert spec_errors({"preset": "mnist-mlp"}) == {}


def test_spec_round_trips_through_json():
    spec = build_spec({"preset": "mnist-cnn", "batch_sizes": "16,32", "seeds": "3"})
    again = SweepSpec.from_dict(json.loads(spec.to_json()))
    assert again == spec
    assert with_overrides(spec, epochs=7).epochs == 7


def test_largest_seed_is_accepted():
    assert build_spec({"seeds": f"0,{SEED_LIMIT - 1}"}).seeds == (0, SEED_LIMIT - 1)


def test_blank_learning_rate_stays_blank_in_the_spec_the_child_rebuilds():
    # mnist-mlp's preset rate is 0.001; an empty field means the optimizer's own default.
    assert PRESETS["mnist-mlp"].defaults["lr"] == 0.001
    spec = build_spec({"preset": "mnist-mlp", "lr": ""})
    assert spec.lr is None
    again = SweepSpec.from_dict(json.loads(spec.to_json()))
    assert again == spec and again.lr is None
    run = spec.runs()[0]
    assert RunSpec.from_dict(json.loads(json.dumps(run.to_dict()))) == run
    assert with_overrides(spec, epochs=2).lr is None
    # and a preset's value is still what a form left untouched gets
    assert build_spec({"preset": "mnist-mlp"}).lr == 0.001


def test_from_dict_validates_every_field_without_filling_in_preset_values():
    d = build_spec({"preset": "mnist-cnn"}).to_dict()
    with pytest.raises(SpecError) as e:
        SweepSpec.from_dict({**d, "momentum": None})
    assert e.value.field == "momentum"
    with pytest.raises(SpecError) as e:
        SweepSpec.from_dict({**d, "seeds": [SEED_LIMIT]})
    assert e.value.field == "seeds"
    # a field an older file lacks takes its preset's value
    d.pop("sync")
    assert SweepSpec.from_dict(d).sync == PRESETS["mnist-cnn"].defaults["sync"]


def test_home_relative_paths_are_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    np.savez(tmp_path / "x.npz", x_train=np.zeros((4, 2)))
    (tmp_path / "m.keras").write_bytes(b"")
    spec = build_spec({"data": "~/x.npz", "workload": "keras-file", "model_file": "~/m.keras", "optimizer": "adam"})
    assert spec.data == str(tmp_path / "x.npz")
    assert spec.model_file == str(tmp_path / "m.keras")
    assert (spec.samples, spec.val_samples, spec.batch_sizes) == (4, 0, (4,))  # defaults that fit the 4 rows
    assert "does not exist" in spec_errors({"data": "~/missing.npz"})["data"].message


def test_preset_and_user_values_merge_one_way():
    given = {"preset": "mnist-cnn", "budget": {"unit": "epochs", "amount": 2}, "lr": None}
    merged = preset_values(given)  # a file's spec: None is a value
    assert merged["epochs"] == 2 and merged["lr"] is None and merged["momentum"] == 0.5
    assert set(merged) == set(SweepSpec().flat())
    assert preset_values(given, blank_means_default=True)["lr"] == 0.02  # an option not given
    assert preset_values({})["preset"] == "mnist-autoencoder"


def test_a_data_file_sets_the_counts_it_holds_and_a_model_file_the_user_model_preset(tmp_path):
    data = tmp_path / "d.npz"
    np.savez(data, x_train=np.zeros((2500, 3)), y_train=np.zeros(2500), x_test=np.zeros((500, 3)), y_test=np.zeros(500))
    (tmp_path / "m.keras").write_bytes(b"")
    spec = build_spec({"model_file": str(tmp_path / "m.keras"), "data": str(data)})
    assert (spec.preset, spec.workload, spec.optimizer) == ("keras-file", "keras-file", "model")
    assert (spec.samples, spec.val_samples) == (2500, 500)
    assert spec.batch_sizes == PRESETS["keras-file"].defaults["batch_sizes"]  # all fit 2,500 rows
    # (the autoencoder sized from the data: the default preset's 784-wide model would refuse 3 values a sample)
    assert (
        build_spec({"workload": "autoencoder", "data": str(data), "samples": "100", "batch_sizes": "10"}).samples == 100
    )
    # a value larger than the file holds names the count, under its own field
    errors = spec_errors({"workload": "autoencoder", "data": str(data), "samples": "5000", "val_samples": "1000"})
    assert errors["samples"].message.startswith("5000 training samples asked for but 'd' has 2500; use 1 to 2500")
    assert "1000 validation samples asked for but 'd' has 500; use 0 to 500" in errors["val_samples"].message
    # left empty (the window's fields): everything the file holds; the bundled data has no such default
    values = {"workload": "autoencoder", "data": str(data), "samples": " ", "val_samples": "", "batch_sizes": "8"}
    assert build_spec(values).samples == 2500
    assert "not an integer" in spec_errors({"samples": ""})["samples"].message
    # a file's spec (every field present) is rebuilt as it was
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    # the bundled data keeps the preset's counts
    assert build_spec({}).samples == PRESETS["mnist-autoencoder"].defaults["samples"]


def test_a_validation_target_on_a_file_without_a_test_split_says_so(tmp_path):
    data = tmp_path / "train_only.npz"
    np.savez(data, x_train=np.zeros((100, 4)), y_train=np.zeros(100))
    errors = spec_errors({"preset": "mlp", "data": str(data), "batch_sizes": "10", "target": "val_loss=0.5"})
    assert "has no test split (x_test)" in errors["target"].message
    spec = build_spec({"preset": "mlp", "data": str(data), "batch_sizes": "10", "target": "train_loss=0.5"})
    assert spec.val_samples == 0
