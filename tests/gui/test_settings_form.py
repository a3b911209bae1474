"""The setup panel draws a settings group's fields from their Qt-free description (core.settings): the toy
group of tests/core/test_settings_groups.py, defined there alone, gets its box, editor, error line and value
here; the budget group's abort_losers gets a check box beside keep_training, enabled with a target only."""

from __future__ import annotations

from batchlab.core import settings
from PySide6.QtWidgets import QCheckBox, QGroupBox, QLabel, QLineEdit, QWidget

from tests.core.test_settings_groups import TOY
from tests.gui.panels import MLP, shown_panel


def test_a_toy_groups_field_is_drawn_checked_and_read_like_any_other(qtbot, tmp_path):
    with settings.registered(TOY):
        panel = shown_panel(qtbot, tmp_path)
        box = next(b for b in panel.findChildren(QGroupBox) if b.title() == "Toy settings")
        editor = box.findChild(QLineEdit, "toy_level")
        assert editor is not None and editor.toolTip() == TOY.settings[0].help
        assert panel.field_label("toy_level") == "Toy level" and editor.text() == "3"  # the group's default
        editor.setText("12")
        error = panel.findChild(QLabel, "error_toy_level")
        assert not panel.valid and error.isVisible() and error.text().startswith("12 is too large")
        editor.setText("7")
        assert panel.valid and not error.isVisible()
        assert panel.values()["toy_level"] == "7" and panel.spec().toy_level == 7
        panel.set_values({**MLP, "toy_level": 2})
        assert editor.text() == "2"


def test_abort_losers_sits_beside_keep_training_and_needs_a_target(qtbot, tmp_path):
    panel = shown_panel(qtbot, tmp_path)
    box = panel.findChild(QCheckBox, "abort_losers")
    assert box is not None and box.text() == "Abort runs that cannot win"
    assert panel.convergence.isAncestorOf(box) and not box.isEnabled()
    box.setChecked(True)
    assert panel.valid and panel.values()["abort_losers"] is False  # no target: not part of the sweep
    panel.set_values({**MLP, "target": "val_loss=0.2", "abort_losers": True})
    assert box.isEnabled() and box.isChecked() and panel.spec().abort_losers is True
    assert "runs that cannot win stopped" in panel.convergence.summary.text()


def test_the_built_in_groups_add_no_box_and_no_second_editor(qtbot, tmp_path):
    """Every built-in setting has its place in the panel's sections: no box of leftovers, one editor each."""
    panel = shown_panel(qtbot, tmp_path)
    assert [b.title() for b in panel.findChildren(QGroupBox)] == [
        "Experiment",
        "Budget and batch sizes",
        "Optimizer and seeds",
        "Run",
    ]
    for _group, _title, fields in settings.form_description():
        for field in fields:
            assert len(panel.findChildren(QWidget, field.name)) == 1, field.name


def test_the_run_section_says_where_runs_execute_and_refuses_parallel_with_ray(qtbot, tmp_path):
    panel = shown_panel(qtbot, tmp_path)
    run = next(b for b in panel.findChildren(QGroupBox) if b.title() == "Run")
    parallel, ray, cpus = (run.findChild(QLineEdit, name) for name in ("parallel", "ray", "ray_cpus"))
    assert panel.field_label("parallel") == "Runs at once" and panel.field_label("ray") == "Ray cluster"
    assert not cpus.isEnabled() and panel.values()["ray_cpus"] is None  # no Ray: no CPU share
    parallel.setText("2")
    assert panel.valid and panel.spec().parallel == "2"
    ray.setText("local")
    assert not panel.valid and cpus.isEnabled()
    assert "Ray decides how many runs train at once" in panel.findChild(QLabel, "error_parallel").text()
    parallel.setText("")
    cpus.setText("0.5")
    assert panel.valid and panel.spec().ray == "local" and panel.spec().ray_cpus == 0.5
