"""The window submits a sweep to a Ray cluster: the Run section's "Ray cluster" field set to `local`, a tiny
real sweep through the real window (offscreen), trained by the one local test instance (tests/core/ray_session.py),
and the file records the node each run trained on."""

from __future__ import annotations

import sys

from batchlab.core.runfile.reader import read_run_file

from tests.core.ray_session import local_ray
from tests.gui.conftest import TINY, wait_until


def test_the_window_runs_a_sweep_on_ray_local(main_window, tmp_path, request):
    ray = local_ray()
    w = main_window
    out = str(tmp_path / "on-ray.h5")
    w.setup.set_values({**TINY, "tf_threads": "1", "ray": "local", "ray_cpus": "1"})
    assert w.setup.ray.text() == "local" and w.setup.ray_cpus.text() == "1"
    w.setup.out.setText(out)
    assert w.start_sweep()
    wait_until(lambda: not w.running, timeout_s=300)
    assert w.worker.status == "complete"
    record = read_run_file(out)
    assert record.spec["ray"] == "local"
    assert [(r.batch_size, r.status) for r in record.runs] == [(64, "ok"), (128, "ok")]
    node = ray.nodes()[0]
    assert {r.attrs["ray_node"] for r in record.runs} == {node["NodeID"]}
    assert "at local: 1 CPU per run, 2 at once" in record.environment["ray_cluster"]
    assert [r.status for r in w.data.runs.values()] == ["ok", "ok"]  # the window's views got the same events
    core_tests_ran = any("tests/core" in str(item.fspath) for item in request.session.items)
    if not core_tests_ran:  # core tests may import TensorFlow into this same pytest process
        assert "tensorflow" not in sys.modules  # the runs trained in Ray's worker processes
