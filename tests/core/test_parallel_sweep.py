"""A real sweep with two runs at once on the CPU (`--parallel 2`) against the same sweep one run at a time:
the same runs, statuses and step counts, every run's warning and slot recorded, and a report that says so."""

from __future__ import annotations

import json

import numpy as np
from batchlab.core import cli
from batchlab.core.analysis.concurrency import shared_cores_note
from batchlab.core.model import SweepData
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import build_spec
from batchlab.core.sweep.runner import run_sweep

SPEC = {"workload": "mlp", "samples": 256, "epochs": 1, "batch_sizes": "16,32,64,128", "tf_threads": 1}
SPEC |= {"device": "cpu", "seeds": "0"}


def _sweep(path, **values):
    spec = build_spec({**SPEC, **values})
    seen, most = SweepData(), []

    def sink(event):
        seen.handle(event)
        most.append(len(seen.in_flight))

    assert run_sweep(spec, path, sink=sink) == "complete"
    return read_run_file(path), max(most)


def test_two_runs_at_once_give_the_same_runs_as_one_at_a_time_each_with_its_warning(tmp_path, capsys):
    alone, most_alone = _sweep(tmp_path / "alone.h5")
    paired, most_paired = _sweep(tmp_path / "paired.h5", parallel="2")
    assert (most_alone, most_paired) == (1, 2)  # two runs were in flight at once
    assert [(r.index, r.batch_size, r.seed, r.status) for r in paired.runs] == [
        (r.index, r.batch_size, r.seed, r.status) for r in alone.runs
    ]
    assert all(r.status == "ok" for r in paired.runs) and paired.status == "complete"
    for a, p in zip(alone.runs, paired.runs, strict=True):
        assert len(p.steps["loss"]) == len(a.steps["loss"]) == 256 // a.batch_size
        assert len(p.epochs["epoch"]) == len(a.epochs["epoch"]) == 1
        assert p.epochs["rss_peak_bytes"][0] > 0
        assert np.isclose(p.epochs["train_loss"][0], a.epochs["train_loss"][0], rtol=1e-5)
        # The same seed, data and single-threaded kernels: the runs beside each other computed the same losses.
        np.testing.assert_allclose(p.steps["loss"], a.steps["loss"], rtol=1e-5)
        assert (p.attrs["runs_at_once"], p.attrs["shared_cores"]) == (2, 1) and p.attrs["slot"] in (0, 1)
        assert "slot" not in a.attrs
    pids = [r.attrs["pid"] for r in paired.runs]
    assert len(set(pids)) == len(pids)  # a process per run: each run's memory figures are its own process's
    note = shared_cores_note(2)
    for run in paired.runs:
        assert [line for line in paired.log if f"[run {run.index}] run {run.index} {note}" in line]
    assert not [line for line in alone.log if "trained at the same time" in line]

    capsys.readouterr()
    assert cli.main(["report", str(tmp_path / "paired.h5")]) == 0
    report = " ".join(capsys.readouterr().out.split())  # the line is wrapped to the terminal
    assert "Runs at once: 4 of 4 runs trained up to 2 at a time on shared CPU cores (--parallel)" in report
    assert f"each carries the warning that it {note}" in report
    assert report.count("Runs at once") == 1  # at the top, not again in the explanation
    # the recommendation, which chooses by time among other things, says first that these times are shared
    caveat = (
        "The times below come from 4 runs that trained up to 2 at a time on shared CPU cores (--parallel 2), so a "
        "choice by time may not hold for a run alone: run the candidates again with --parallel 1 before relying "
        "on it"
    )
    assert caveat in report
    from batchlab.core.analysis.analyse import analyse
    from batchlab.core.settings.placement import parse_parallel

    assert parse_parallel("1") == ""  # the advice's option is one the spec takes: one run at a time
    window = analyse(SweepData.from_file(tmp_path / "paired.h5"), surface="window").recommendation
    assert window[0].startswith("The times below come from 4 runs") and "set Runs at once to 1" in window[0]
    from batchlab.core.analysis.explain import explain_sweep

    # the window's explanation (the same function) opens with the same line
    assert explain_sweep(SweepData.from_file(tmp_path / "paired.h5"))[0].startswith("Runs at once: 4 of 4 runs")
    assert cli.main(["report", str(tmp_path / "paired.h5"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sweep"]["runs_at_once"].startswith("Runs at once: 4 of 4 runs")
    assert cli.main(["report", str(tmp_path / "alone.h5")]) == 0
    alone_report = capsys.readouterr().out
    assert "Runs at once" not in alone_report and "The times below come from" not in alone_report
