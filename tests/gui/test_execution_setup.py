"""The setup panel's Execution & measurement section: --fused, --xla, --mixed-precision, --noise-scale-every and
--noise-scale-parts (issue 12 item 6, issue 10 item 3), checked by the CLI's parsers and cross-field rules and
built into the CLI's spec. No training: the panel alone (the window only for its last-setup round trip)."""

from __future__ import annotations

import pytest
from batchlab.core import cli
from batchlab.core.errors import SpecError
from batchlab.core.spec import build_spec
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.gui.panels import MLP, shown_panel


@pytest.fixture
def panel(qtbot, tmp_path):
    return shown_panel(qtbot, tmp_path)


@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("accumulate", {"accumulate": "0"}),
        ("accumulate", {"accumulate": "4", "budget_unit": "steps", "epochs": "40"}),
        ("fused", {"fused": "0"}),
        ("fused", {"fused": "8", "loop": "fit"}),
        ("fused", {"fused": "8", "noise_scale_every": "5"}),
        ("mixed_precision", {"mixed_precision": True, "device": "cpu"}),
        ("noise_scale_every", {"noise_scale_every": "0"}),
        ("noise_scale_every", {"noise_scale_every": "5", "loop": "fit"}),
        ("noise_scale_parts", {"noise_scale_every": "5", "noise_scale_parts": "65"}),
        # 32 micro-batches of batch 16: a cross-field rule
        ("noise_scale_parts", {"noise_scale_every": "5", "noise_scale_parts": "32"}),
    ],
    ids=["accumulate-0", "accumulate-steps", "fused-0", "fused-fit", "fused-noise", "mixed-cpu", "every-0"]
    + ["every-fit", "parts-65", "parts-batch"],
)
def test_each_field_shows_the_cli_message_under_it_and_opens_the_section(panel, field, values):
    panel.execution.set_expanded(False)
    panel.set_values({**MLP, **values})
    with pytest.raises(SpecError) as raised:
        build_spec(panel.values())
    assert raised.value.field == field
    label = panel._error_labels[field]
    assert label.isVisible() and label.text() == raised.value.message
    assert not panel.valid and panel.first_error() == field
    assert panel.execution.expanded


def test_refusals_the_spec_files_under_a_convergence_field(panel):
    panel.set_values({**MLP, "fused": "4", "batch_schedule": "grow"})
    assert panel.errors.get("batch_schedule", "").startswith("'grow' with fused 4 is not supported")
    panel.set_values({**MLP, "accumulate": "4", "lr_rule": "linear"})
    assert panel.errors.get("lr_rule", "").startswith("'linear' with accumulate 4 is not supported yet")


def test_fields_that_do_not_apply_are_disabled_with_why(panel):
    p = panel
    p.set_values({**MLP, "noise_scale_every": "", "noise_scale_parts": "1"})
    assert not p.noise_scale_parts.isEnabled() and "Noise scale every" in p.noise_scale_parts.toolTip()
    assert p.valid, p.errors  # a bad value in a field that does not apply is not sent
    p.noise_scale_every.setText("10")
    assert p.noise_scale_parts.isEnabled() and "noise_scale_parts" in p.errors
    assert p.noise_scale_parts.toolTip().startswith("micro-batches a measured batch is split into")
    p.apply_preset("keras-file")
    p.mixed_precision.setChecked(True)
    assert not p.mixed_precision.isEnabled() and "dtypes it was saved with" in p.mixed_precision.toolTip()
    assert p.values()["mixed_precision"] is False


CLI_CASES = [
    ["--fused", "8", "--xla", "--accumulate", "4"],
    ["--noise-scale-every", "5", "--noise-scale-parts", "8", "--lr-rule", "linear"],
    ["--mixed-precision", "--device", "auto", "--fused", "2", "--sync", "every_step", "--xla"],
    ["--fused", "16", "--xla", "auto"],
]


@pytest.mark.parametrize("argv", CLI_CASES, ids=["fused-xla", "noise-scale", "mixed-precision", "xla-auto"])
def test_the_panel_builds_the_spec_the_cli_builds_and_loads_it_back(panel, argv):
    args = cli._build_parser().parse_args(
        ["sweep", "--preset", "mnist-mlp", "--samples", "256", "--val-samples", "64", "--batch-sizes", "16,64", *argv]
    )
    values = cli.sweep_values(args)
    cli_spec = build_spec(values)
    panel.set_values({k: v for k, v in values.items() if v is not None})
    assert panel.valid, panel.errors
    assert panel.spec().to_dict() == cli_spec.to_dict()
    panel.apply_preset("mnist-cnn")  # then a run file's spec fills every field again
    panel.set_values(cli_spec.to_dict())
    assert panel.spec().to_dict() == cli_spec.to_dict()
    d = cli_spec.to_dict()
    assert panel.accumulate.text() == str(d["accumulate"]) and panel.fused.text() == str(d["fused"])
    assert panel.values()["xla"] == d["xla"]  # the box partly checked for auto
    assert (
        panel.xla.checkState()
        == {
            True: Qt.CheckState.Checked,
            False: Qt.CheckState.Unchecked,
            "auto": Qt.CheckState.PartiallyChecked,
        }[d["xla"]]
    )
    assert panel.mixed_precision.isChecked() is d["mixed_precision"]
    assert panel.noise_scale_every.text() == ("" if d["noise_scale_every"] is None else str(d["noise_scale_every"]))


def test_the_section_summarises_itself_and_the_preset_description_lists_changes(panel):
    p = panel
    assert not p.execution.expanded and p.execution.summary.isVisible()
    assert p.execution.summary.text() == "one step per call · float32 · noise scale off"
    p.set_values({**MLP, "fused": "8", "xla": True})
    assert p.execution.summary.text() == "8 steps per call · XLA · float32 · noise scale off"
    p.accumulate.setText("4")
    assert p.execution.summary.text().startswith("4 micro-batches per update · 8 steps per call")
    assert "fused 8 (preset: 1); xla yes (preset: no)" in p.preset_changes.text()
    p.xla.click()  # checked -> unchecked -> partly checked (auto), as a user clicks through them
    assert p.values()["xla"] is False
    p.xla.click()
    assert p.values()["xla"] == "auto" and p.spec().xla == "auto"
    assert "8 steps per call · XLA where it pays" in p.execution.summary.text()
    p.set_values({**MLP, "noise_scale_every": "20", "noise_scale_parts": "8"})
    assert p.execution.summary.text().endswith("noise scale every 20 steps in 8 parts")
    assert "noise scale every 20 (preset: none)" in p.preset_changes.text()


def test_the_last_setup_keeps_them_and_ctrl_r_finds_a_bad_one(main_window, qtbot):
    w = main_window
    w.setup.set_values({**MLP, "fused": "4", "xla": True, "mixed_precision": True, "device": "auto"})
    assert w.setup.valid, w.setup.errors
    w.save_settings()
    w.setup.apply_preset("mnist-cnn")
    w._restore_settings()
    assert w.setup.fused.text() == "4" and w.setup.xla.isChecked() and w.setup.mixed_precision.isChecked()
    w.setup.set_values({**MLP, "noise_scale_every": "0"})
    w.setup.execution.set_expanded(False)
    w.activateWindow()
    qtbot.waitActive(w)
    qtbot.keyClick(w, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert w.status_label.text().startswith("Cannot run yet: Noise scale every (steps): 0 is too small")
    assert w.setup.execution.expanded and QApplication.focusWidget() is w.setup.noise_scale_every


def test_the_replicas_field_is_drawn_and_refuses_a_batch_that_does_not_divide(panel):
    """--replicas in the window: a row drawn from its description, the CLI's one-line message under it."""
    assert "replicas" in panel._editors
    panel.set_values({**MLP, "replicas": "2", "batch_sizes": "33"})
    with pytest.raises(SpecError) as raised:
        build_spec(panel.values())
    assert raised.value.field == "replicas" and "does not divide by 2 replicas" in raised.value.message
    assert panel._error_labels["replicas"].text() == raised.value.message and not panel.valid
    panel.set_values({**MLP, "replicas": "2", "batch_sizes": "32,64"})
    assert panel.valid and build_spec(panel.values()).replicas == 2
