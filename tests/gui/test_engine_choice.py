"""The setup panel offers both training engines and the loop's sync mode, validated by core.spec."""

from batchlab.core.spec import LOOPS, SYNC_MODES, build_spec
from batchlab.gui.setup_panel import SetupPanel


def test_engine_and_sync_choices_reach_the_spec(qtbot, tmp_path):
    panel = SetupPanel(str(tmp_path))
    qtbot.addWidget(panel)
    assert [panel.loop.itemData(i) for i in range(panel.loop.count())] == list(LOOPS)
    assert [panel.sync.itemData(i) for i in range(panel.sync.count())] == list(SYNC_MODES)
    spec = build_spec(panel.values())
    assert (spec.loop, spec.sync) == ("loop", "every_step")  # the defaults
    assert panel.sync.isEnabled()

    panel.set_values({"preset": "mnist-mlp", "loop": "fit"})
    assert build_spec(panel.values()).loop == "fit"
    assert not panel.sync.isEnabled()  # fit waits for the device every step; the choice does not apply

    panel.set_values({"loop": "loop", "sync": "sampled"})  # e.g. a run file's spec reopened
    spec = build_spec(panel.values())
    assert (spec.loop, spec.sync) == ("loop", "sampled") and panel.sync.isEnabled() and panel.valid
