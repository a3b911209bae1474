"""The setup panel's convergence fields (issue 9 item 8): budget kind, target, learning-rate rule, warmup,
schedule, Nesterov, weight decay and lr-find rates, checked by the CLI's parsers and built into the CLI's spec.
No training: the panel alone (a window only for Ctrl+R), run files written by the one writer from events."""

from __future__ import annotations

import pytest
from batchlab.core import cli
from batchlab.core.errors import SpecError
from batchlab.core.events import make_event, now_iso
from batchlab.core.model import SweepData
from batchlab.core.runfile.writer import RunFileWriter
from batchlab.core.spec import build_spec
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.gui.panels import MLP, shown_panel


@pytest.fixture
def panel(qtbot, tmp_path):
    return shown_panel(qtbot, tmp_path)


@pytest.mark.parametrize(
    ("field", "values", "shown_under"),
    [
        ("epochs", {"budget_unit": "steps", "epochs": "0"}, "epochs"),
        ("target", {"target": "val_accuracy=1.5"}, "target"),
        ("target", {"target": "val_accuracy=0.9", "val_samples": "0"}, "target"),
        ("eval_every", {"eval_every": "0"}, "eval_every"),
        ("lr_base_batch", {"lr_rule": "linear", "lr_base_batch": "0"}, "lr_base_batch"),
        ("warmup", {"lr_rule": "linear", "warmup": "-1"}, "warmup"),
        # longer than batch 64's budget of 4 steps x 2 epochs: a cross-field rule
        ("warmup", {"lr_rule": "sqrt", "warmup": "8", "warmup_unit": "steps", "epochs": "2"}, "warmup"),
        ("lr_decay_factor", {"lr_schedule": "step", "lr_decay_factor": "1.5"}, "lr_decay_factor"),
        ("lr_decay_every", {"lr_schedule": "step", "lr_decay_every": "0"}, "lr_decay_every"),
        ("lr_patience", {"lr_schedule": "plateau", "lr_patience": "x"}, "lr_patience"),
        ("lr_schedule", {"lr_schedule": "plateau", "val_samples": "0"}, "lr_schedule"),
        ("weight_decay", {"optimizer": "adamw", "weight_decay": "-0.1"}, "weight_decay"),
        ("lr_from", {"lr_from": "no-such-find.h5"}, "lr_from"),
        ("nesterov", {"optimizer": "sgd", "momentum": "0", "nesterov": True}, "momentum"),
        ("batch_growth_factor", {"batch_schedule": "grow", "batch_growth_factor": "1"}, "batch_growth_factor"),
        ("batch_switch_to", {"batch_schedule": "two_phase", "batch_switch_to": "0"}, "batch_switch_to"),
    ],
)
def test_each_convergence_field_shows_the_cli_message_under_it(panel, field, values, shown_under):
    panel.set_values({**MLP, **values})
    with pytest.raises(SpecError) as raised:
        build_spec(panel.values())
    assert raised.value.field == field or field == "epochs"  # a steps amount is filed under epochs, named steps
    label = panel._error_labels[shown_under]
    assert label.isVisible(), panel.errors
    assert label.text() == raised.value.message
    assert not panel.valid
    if panel.convergence.isAncestorOf(panel._editors[field]):
        assert panel.convergence.expanded  # an error inside the collapsed section opens it


def test_ctrl_r_names_a_convergence_field_and_opens_its_section(main_window, qtbot):
    w = main_window
    w.activateWindow()
    qtbot.waitActive(w)
    w.setup.convergence.set_expanded(False)
    w.setup.set_values({"lr_schedule": "step", "lr_decay_factor": "2"})
    w.setup.convergence.set_expanded(False)
    qtbot.keyClick(w, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert w.status_label.text().startswith("Cannot run yet: Decay factor: '2' is out of range")
    assert w.setup.convergence.expanded and QApplication.focusWidget() is w.setup.lr_decay_factor


def test_fields_that_do_not_apply_are_disabled_and_send_their_neutral_value(panel):
    p = panel
    p.set_values({**MLP, "optimizer": "adam", "nesterov": True, "weight_decay": "0.1"})
    assert not p.nesterov.isEnabled() and not p.weight_decay.isEnabled() and p.valid, p.errors
    assert p.spec().nesterov is False and p.spec().weight_decay is None
    p.set_values({**MLP, "optimizer": "adamw", "weight_decay": "0.1"})
    assert p.weight_decay.isEnabled() and p.spec().weight_decay == 0.1
    p.set_values({**MLP, "optimizer": "sgd", "momentum": "0.9", "nesterov": True})
    assert p.nesterov.isEnabled() and p.spec().nesterov is True
    # constant rule: no B0, nothing to ramp (the CLI refuses a warmup there; the window does not send it)
    p.set_values({**MLP, "lr_rule": "constant", "warmup": "2", "lr_base_batch": "32"})
    assert not p.warmup.isEnabled() and not p.lr_base_batch.isEnabled() and not p.warmup_unit.isEnabled()
    assert p.valid and p.spec().warmup == 0.0
    for schedule, enabled in (
        ("constant", set()),
        ("step", {"lr_decay_factor", "lr_decay_every"}),
        ("cosine", set()),
        ("plateau", {"lr_decay_factor", "lr_patience"}),
    ):
        p.set_values({**MLP, "lr_schedule": schedule})
        on = {f for f in ("lr_decay_factor", "lr_decay_every", "lr_patience") if p._editors[f].isEnabled()}
        assert on == enabled, schedule
    p.set_values({**MLP, "keep_training": True})  # no target: nothing to keep training after
    assert not p.keep_training.isEnabled() and not p.target.isEnabled() and p.spec().keep_training is False
    p.set_values({**MLP, "target": "val_loss=0.5", "keep_training": True})
    assert p.keep_training.isEnabled() and p.spec().keep_training is True
    # the lr-find file replaces the learning rate; "model" keeps the file's optimizer and its rate
    assert not p.lr_pick.isEnabled()  # which suggestion to take: only with a file to take it from
    p.lr_from.setText("find.h5")
    assert not p.lr.isEnabled() and p.lr_pick.isEnabled()
    p.lr_from.setText("")
    p.apply_preset("keras-file")
    assert not any(p._editors[f].isEnabled() for f in ("lr_rule", "lr_schedule", "lr_from", "warmup"))
    assert not p.range_test_button.isEnabled()


CLI_CASES = [
    ["--steps", "40", "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--nesterov"]
    + ["--lr-rule", "linear", "--lr-base-batch", "32", "--warmup", "10", "--warmup-unit", "steps"]
    + ["--lr-schedule", "cosine", "--target", "val_accuracy=0.9", "--eval-every", "5", "--keep-training"],
    ["--examples", "1000", "--optimizer", "lars", "--weight-decay", "0.001", "--lr-rule", "srsr"]
    + ["--lr-schedule", "step", "--lr-decay-factor", "0.5", "--lr-decay-every", "1", "--target", "train_loss<0.3"],
    ["--max-epochs", "3", "--optimizer", "adamw", "--weight-decay", "0.01", "--lr-schedule", "plateau"]
    + ["--lr-patience", "1", "--lr-decay-factor", "0.2", "--target", "val_error=0.2"],
    ["--preset", "golmant-lsr", "--samples", "256", "--batch-sizes", "16,64", "--lr-rule", "constant", "--warmup", "0"],
    ["--preset", "mnist-cnn-98", "--samples", "256", "--val-samples", "64", "--batch-sizes", "16,64", "--target", ""],
    ["--batch-schedule", "grow", "--batch-growth-factor", "2", "--batch-growth-every", "1", "--max-batch", "128"],
]


CLI_IDS = ["sgd-lsr-cosine", "lars-examples", "adamw-plateau", "blr", "no-target", "grow"]


@pytest.mark.parametrize("argv", CLI_CASES, ids=CLI_IDS)
def test_the_panel_builds_the_spec_the_cli_builds(panel, argv):
    args = cli._build_parser().parse_args(
        ["sweep", "--preset", "mnist-mlp", "--samples", "256", "--val-samples", "64", "--batch-sizes", "16,64", *argv]
    )
    values = cli.sweep_values(args)
    cli_spec = build_spec(values)
    given = {k: v for k, v in values.items() if v is not None}
    panel.set_values(given)
    assert panel.valid, panel.errors
    assert panel.spec().to_dict() == cli_spec.to_dict()
    # and the same spec again after the panel is filled from it (a run file's settings)
    panel.set_values(cli_spec.to_dict())
    assert panel.spec().to_dict() == cli_spec.to_dict()


def _spec_only_file(path, spec) -> str:
    """A run file as the one writer makes it, holding just a sweep's spec (no runs trained)."""
    with RunFileWriter(path) as writer:
        writer.handle(make_event("sweep_started", spec=spec.to_dict(), runs=[], environment={}, started=now_iso()))
        writer.handle(make_event("sweep_ended", status="ok", ended=now_iso()))
    return str(path)


@pytest.mark.parametrize(("unit", "amount"), [("steps", 500), ("examples", 3000), ("epochs", 4)])
def test_a_run_files_budget_loads_into_its_own_kind(panel, tmp_path, unit, amount):
    spec = build_spec({**MLP, "budget_unit": unit, "epochs": amount})
    data = SweepData.from_file(_spec_only_file(tmp_path / "budget.h5", spec))
    panel.set_values(dict(data.spec))
    assert panel.budget_unit.currentData() == unit and panel.epochs.text() == str(amount)
    assert panel.field_label("epochs") == unit.capitalize()
    assert panel.spec().budget == spec.budget
    if unit != "epochs":
        assert f"budget {amount} {unit} (preset: 5 epochs)" in panel.preset_changes.text()


def test_the_section_summarises_itself_while_collapsed(panel):
    p = panel
    p.apply_preset("golmant-lsr")
    assert not p.convergence.expanded and p.convergence.summary.isVisible()
    text = p.convergence.summary.text()
    assert text.startswith("to train_loss < 0.1 · evaluated every 10 steps · linear (LSR), B0 16 · warmup 2 epochs")
    assert p.field_label("epochs") == "Max epochs"  # with a target the budget is the most a run trains
    p.set_values({"preset": "golmant-lsr", "lr_rule": "constant"})
    assert "warmup 0 (preset: 2)" in p.preset_changes.text()
    assert "lr rule constant (preset: linear)" in p.preset_changes.text()


def test_your_models_compiled_metrics_are_target_choices(panel, tmp_path, monkeypatch):
    """A .keras model's compiled metrics (read without TensorFlow) join the target metrics as val_NAME."""
    from batchlab.core import model_file
    from batchlab.gui import data_fields

    info = model_file.ModelInfo("m", [(784,)], ["float32"], [(10,)], "mse", metrics=["mae"])
    for module in (data_fields, model_file):
        monkeypatch.setattr(module, "cached_model_info", lambda _path: info)
    model = tmp_path / "m.keras"
    model.write_bytes(b"")  # its outline comes from the stand-in above
    names = lambda: [panel.target_metric.itemData(i) for i in range(panel.target_metric.count())]  # noqa: E731
    assert "val_mae" not in names()
    panel.set_values({"preset": "keras-file", "model_file": str(model)})
    assert "val_mae" in names()  # offered once the model is named
    panel.target_metric.setCurrentIndex(panel.target_metric.findData("val_mae"))
    panel.target.setText("0.1")
    assert panel.valid, panel.errors
    assert panel.spec().target == "val_mae=0.1"
