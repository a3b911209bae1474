"""The spec: the one validation path the CLI and the window share."""

import json

import pytest
from batchlab.core.presets import PRESETS
from batchlab.core.spec import SpecError, SweepSpec, build_spec, spec_errors, with_overrides


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
    ],
)
def test_bad_values_name_the_field_and_what_is_allowed(values, field, phrase):
    with pytest.raises(SpecError) as e:
        build_spec(values)
    assert e.value.field == field
    assert phrase in str(e.value)
    assert str(e.value).startswith(f"{field}: ")
    assert "\n" not in str(e.value)
    # the window asks for all errors at once and shows the same text beside the field
    assert spec_errors(values)[field] == str(e.value)


def test_spec_errors_reports_every_bad_field():
    errors = spec_errors({"batch_sizes": "0", "lr": "x", "epochs": "-1"})
    assert set(errors) == {"batch_sizes", "lr", "epochs"}
    assert spec_errors({"preset": "mnist-mlp"}) == {}


def test_spec_round_trips_through_json():
    spec = build_spec({"preset": "mnist-cnn", "batch_sizes": "16,32", "seeds": "3"})
    again = SweepSpec.from_dict(json.loads(spec.to_json()))
    assert again == spec
    assert with_overrides(spec, epochs=7).epochs == 7
