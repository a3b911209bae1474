"""A Ray node lost mid-run (core/sweep/ray_launcher.py): the run it trained is `crashed` with the steps it had sent
and a one-line reason naming the node, and the sweep finishes on the node left. Ray's own test cluster
(`ray.cluster_utils.Cluster`: a head without CPUs and two 1-CPU nodes, each a raylet of its own on this machine)
in a subprocess, since this test process holds the shared local instance (tests/core/ray_session.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from batchlab.core.training.faults import INPUT_DELAY_ENV

SCRIPT = textwrap.dedent(
    """
    import json, logging, shutil, sys, tempfile
    import ray
    from ray.cluster_utils import Cluster
    from batchlab.core.runfile.reader import read_run_file
    from batchlab.core.spec import build_spec
    from batchlab.core.sweep.runner import run_sweep

    # its own temp folder (short: socket paths), so the address file `ray start` leaves for `auto` is not the
    # machine's /tmp/ray one, which any other process's ray.init() would find
    store, temp = 100 << 20, tempfile.mkdtemp(prefix="bl-ray-", dir="/tmp")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                            "object_store_memory": store, "temp_dir": temp})
    nodes = [cluster.add_node(num_cpus=1, object_store_memory=store, temp_dir=temp) for _ in range(2)]
    ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.ERROR)
    victim, where, removed = nodes[1].node_id, {}, []

    def sink(event):
        if event["type"] == "run_started":
            where[event["run"]] = event["ray_node"]
        elif event["type"] == "steps" and not removed and where.get(event["run"]) == victim:
            removed.append(event["run"])
            cluster.remove_node(nodes[1])  # its raylet and the workers on it are gone

    values = {"preset": "mnist-mlp", "samples": 256, "val_samples": 0, "epochs": 1, "device": "cpu",
              "batch_sizes": "16,32,64", "tf_threads": 1, "ray": "auto"}
    try:
        status = run_sweep(build_spec(values), sys.argv[1], sink=sink)
        runs = [{"status": r.status, "steps": len(r.steps.get("loss", [])),
                 "epochs": len(r.epochs.get("train_loss", [])), "node": r.attrs.get("ray_node", ""),
                 "message": r.message} for r in read_run_file(sys.argv[1]).runs]
        print(json.dumps({"status": status, "victim": victim, "removed": removed, "runs": runs}))
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    """
)


def test_a_node_lost_mid_run_gives_a_crashed_run_naming_the_node_and_the_sweep_finishes(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", INPUT_DELAY_ENV: "0.2"}  # slow steps: the run is mid-epoch
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "lost.h5")], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(result)  # shown if an assertion below fails
    assert result["status"] == "complete" and len(result["removed"]) == 1
    lost_index = result["removed"][0]
    runs = result["runs"]
    lost = runs[lost_index]
    assert lost["status"] == "crashed" and lost["node"] == result["victim"]
    assert lost["steps"] >= 1 and lost["epochs"] == 0  # what it streamed is kept; its epoch never ended
    assert lost["message"].startswith("Ray node ")
    assert f", id {result['victim'][:8]}) was lost while training it (NodeDiedError: " in lost["message"]
    assert "\n" not in lost["message"]
    others = [r for i, r in enumerate(runs) if i != lost_index]
    assert [r["status"] for r in others] == ["ok", "ok"] and result["victim"] not in {r["node"] for r in others}
