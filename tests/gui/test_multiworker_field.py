"""--workers in the window's Execution section (issue 27 item 3): a row drawn from its description, the CLI's
one-line refusal under it, the value in the spec and in the section's summary line. No training."""

from __future__ import annotations

import pytest
from batchlab.core.errors import SpecError
from batchlab.core.spec import build_spec

from tests.gui.panels import MLP, shown_panel


@pytest.fixture
def panel(qtbot, tmp_path):
    return shown_panel(qtbot, tmp_path)


def test_the_workers_field_is_drawn_and_refuses_what_workers_cannot_do(panel):
    assert "workers" in panel._editors
    panel.set_values({**MLP, "workers": "2", "batch_sizes": "33"})
    with pytest.raises(SpecError) as raised:
        build_spec(panel.values())
    assert raised.value.field == "workers" and "does not divide by 2 workers" in raised.value.message
    assert panel._error_labels["workers"].text() == raised.value.message and not panel.valid
    panel.set_values({**MLP, "workers": "2", "replicas": "2", "batch_sizes": "32,64"})
    assert "workers x replicas is not wired" in panel._error_labels["workers"].text() and not panel.valid
    panel.set_values({**MLP, "workers": "2", "batch_sizes": "32,64"})
    assert panel.valid and build_spec(panel.values()).workers == 2
    assert "2 worker processes" in panel.execution.summary.text()
