"""`batchlab export`: chosen runs into a new run file (whole or summary-only) and into TensorBoard event files."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
import types
from pathlib import Path

import h5py
import numpy as np
import pytest
from batchlab.core.cli import main
from batchlab.core.events import EPOCH_ENDED, STEPS
from batchlab.core.model import SweepData
from batchlab.core.runfile.reader import read_run_file
from batchlab.core.spec import SweepSpec

from tests.core.test_runfile import documented_sweep, full_sweep, sweep_started, write

REPO = Path(__file__).resolve().parents[2]


def source_events() -> list[dict]:
    """documented_sweep() (3 runs: ok with evaluations and noise scale, oom, crashed) with compiled metrics and
    each step's learning rate."""
    events = documented_sweep()
    for event in events:
        if event["type"] == STEPS:
            event["lr"] = [0.01 * (1 + 0.001 * s) for s in event["step"]]
        if event["type"] == EPOCH_ENDED:
            event["metrics"] = {"train_mae": 0.3 - 0.01 * event["epoch"], "val_mae": 0.35 - 0.01 * event["epoch"]}
    return events


@pytest.fixture
def source(tmp_path) -> Path:
    return write(tmp_path / "sweep.h5", source_events())


def report_json(path: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["report", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def rows_by_run(payload: dict) -> dict[tuple[int, int], dict]:
    """report --json's run rows by (batch size, seed), without the run index (an export renumbers the runs)."""
    return {(r["batch_size"], r["seed"]): {k: v for k, v in r.items() if k != "index"} for r in payload["runs"]}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["export", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_subset_opens_in_report_with_the_source_figures_and_says_where_it_came_from(source, tmp_path, capsys):
    before = digest(source)
    out = tmp_path / "subset.h5"
    code, text, _ = export(capsys, out, source, "--batch", "16,64")
    assert code == 0 and "wrote 2 runs" in text
    assert digest(source) == before  # the source is never modified

    want = {key: row for key, row in rows_by_run(report_json(source, capsys)).items() if key[0] in (16, 64)}
    assert rows_by_run(report_json(out, capsys)) == want
    record, original = read_run_file(out), read_run_file(source)
    assert [r.status for r in record.runs] == ["ok", "oom"]
    for copy, run in zip(record.runs, original.runs[:2], strict=True):
        for table in ("steps", "epochs", "evals", "noise_scale", "metrics"):
            mine, theirs = getattr(copy, table), getattr(run, table)
            assert mine.keys() == theirs.keys(), table
            for name in theirs:
                np.testing.assert_array_equal(mine[name], theirs[name], err_msg=f"{table}/{name}")
        assert copy.attrs["source_index"] == run.index and copy.attrs["source_file"] == str(source)
    attrs = record.attrs
    assert attrs["format"] == "batchlab-sweep" and attrs["export_content"] == "full"
    assert attrs["export_selection"] == "batch 16,64" and attrs["exported"]
    (entry,) = json.loads(attrs["export_sources"])
    assert entry["file"] == str(source.resolve()) and entry["sha256"] == before and entry["runs"] == [0, 1]
    assert record.spec["batch_sizes"] == [16, 64] and record.spec["lr"] == original.spec["lr"]
    assert any("batchlab export: 2 run(s)" in line for line in record.log)


def test_summary_only_keeps_the_report_figures_and_says_what_it_lacks(source, tmp_path, capsys):
    out = tmp_path / "summary.h5"
    assert export(capsys, out, source, "--summary-only")[0] == 0
    assert rows_by_run(report_json(out, capsys)) == rows_by_run(report_json(source, capsys))
    with h5py.File(out, "r") as f:  # plain h5py sees the documented layout: no steps/, the rest kept
        run = f["runs/run_000"]
        assert set(run) == {"epochs", "evals", "noise_scale", "metrics"} and run.attrs["default"] == "epochs"
        assert run.attrs["steps_left_out"] == 128 and f.attrs["export_content"] == "summary"
        assert math.isclose(run.attrs["summary_samples_per_s"], read_run_file(source).runs[0].samples_per_s)
    assert out.stat().st_size < source.stat().st_size

    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "summary-only export: the per-step tables of 3 runs were left out" in text
    assert "Where each run's time went" not in text  # the time account needs the steps: not shown with zeros
    assert "Loss and time together" not in text  # nor the loss-level comparison
    model = SweepData.from_file(out)  # the window's model: the same figures, and the note
    assert model.left_out_note and all(r.steps_left_out for r in model.runs.values())
    assert [r.figures for r in model.ordered_runs()] == [r.figures for r in read_run_file(source).runs]

    again = tmp_path / "again.h5"  # an export of the summary is a summary too, and says where both came from
    assert export(capsys, again, out, "--status", "ok")[0] == 0
    assert rows_by_run(report_json(again, capsys)) == {
        key: row for key, row in rows_by_run(report_json(source, capsys)).items() if row["status"] == "ok"
    }
    (entry,) = json.loads(read_run_file(again).attrs["export_sources"])
    assert read_run_file(again).attrs["export_content"] == "summary"
    assert entry["file"] == str(out.resolve()) and entry["export_sources"][0]["file"] == str(source.resolve())

    plain = write(tmp_path / "no-target.h5", full_sweep())  # without a target the advice says why it cannot compare
    assert export(capsys, tmp_path / "no-target-summary.h5", plain, "--summary-only")[0] == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "no-target-summary.h5")]) == 0
    assert "holds no per-step losses (a summary-only export left them out)" in capsys.readouterr().out


def test_runs_of_two_files_go_into_one_and_different_settings_are_refused(tmp_path, capsys):
    a = write(tmp_path / "a.h5", source_events())
    spec_b = SweepSpec(batch_sizes=(16, 64, 256), samples=1024, val_samples=256, seeds=(1,))
    b = write(tmp_path / "b.h5", [sweep_started(spec_b), *source_events()[1:]])
    out = tmp_path / "both.h5"
    assert export(capsys, out, a, b, "--status", "ok")[0] == 0
    record = read_run_file(out)
    assert [(r.index, r.attrs["source_file"], r.status) for r in record.runs] == [
        (0, str(a), "ok"),
        (1, str(b), "ok"),
    ]
    assert [s["file"] for s in json.loads(record.attrs["export_sources"])] == [str(a.resolve()), str(b.resolve())]

    other = SweepSpec(batch_sizes=(16, 64, 256), samples=2048, val_samples=256)
    c = write(tmp_path / "c.h5", [sweep_started(other), *source_events()[1:]])
    code, _, err = export(capsys, tmp_path / "mixed.h5", a, c)
    assert code == 2 and err.count("\n") == 1
    assert "different settings" in err and "samples 1024" in err and "samples 2048" in err
    assert not (tmp_path / "mixed.h5").exists()


def test_a_file_whose_writer_was_killed_exports_as_every_view_reads_it(source, tmp_path, capsys):
    """A sweep file that still says running while its writer is gone: its running run is exported interrupted
    (the writing process ended), as report and the window read it, and --status running takes nothing."""
    with h5py.File(source, "r+") as f:  # as a killed writer leaves it: running, and a process start that is not ours
        f.attrs.update({"status": "running", "writer_started": f.attrs["writer_started"] - 3600.0})
        f["runs/run_002"].attrs["status"] = "running"
    out = tmp_path / "killed.h5"
    assert export(capsys, out, source)[0] == 0
    assert rows_by_run(report_json(out, capsys)) == rows_by_run(report_json(source, capsys))
    record = read_run_file(out)
    assert record.runs[2].status == "interrupted" and record.runs[2].message == "the writing process ended"
    assert record.status == "interrupted"
    code, _, err = export(capsys, tmp_path / "none.h5", source, "--status", "running")
    assert code == 2 and "statuses crashed" not in err and "interrupted" in err


@pytest.mark.parametrize(
    "case, words",
    [
        ("missing", "does not exist"),
        ("not_hdf5", "is not an HDF5 file"),
        ("no_match", "no run matches batch 32; the files hold batch sizes 16, 64, 256"),
        ("bad_batch", "batch: 'x' is not a whole number"),
        ("bad_status", "status: 'fine' is not a run status"),
        ("exists", "already exists; choose another file or pass --overwrite"),
        ("is_source", "is one of the files to export"),
        ("tb_with_summary", "summary-only: applies to an HDF5 export"),
        ("tb_into_a_file", "is a file; name a folder for the event files"),
        ("twice", "a file is named twice"),
    ],
)
def test_bad_input_gets_one_line(case, words, source, tmp_path, capsys):
    out, args = tmp_path / "out.h5", []
    if case == "missing":
        args = [out, tmp_path / "nope.h5"]
    elif case == "not_hdf5":
        (tmp_path / "notes.h5").write_text("not a run file")
        args = [out, tmp_path / "notes.h5"]
    elif case == "no_match":
        args = [out, source, "--batch", "32"]
    elif case == "bad_batch":
        args = [out, source, "--batch", "x"]
    elif case == "bad_status":
        args = [out, source, "--status", "fine"]
    elif case == "exists":
        out.write_bytes(b"")
        args = [out, source]
    elif case == "is_source":
        args = [source, source, "--overwrite"]
    elif case == "tb_with_summary":
        args = ["--tensorboard", tmp_path / "tb", source, "--summary-only"]
    elif case == "twice":
        args = ["--tensorboard", tmp_path / "tb", source, tmp_path / ".." / tmp_path.name / source.name]
    elif case == "tb_into_a_file":
        args = ["--tensorboard", source, source]
    before = digest(source)
    code, _, err = export(capsys, *args)
    assert code == 2 and err.startswith("batchlab: ") and err.count("\n") == 1, err
    assert words in err
    assert digest(source) == before


# ---------------------------------------------------------------------- TensorBoard


@pytest.fixture
def tensorflow_free_reader(monkeypatch):
    """TensorBoard's reader on its own TensorFlow stub: it imports TensorFlow whenever it is installed (for its
    file access), and this process must never load it (tests/gui check that the window's process is free of it)."""
    loaded = "tensorflow" in sys.modules
    monkeypatch.setitem(sys.modules, "tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
    yield
    assert loaded or "tensorflow" not in sys.modules, "reading the event files loaded TensorFlow"


def scalars(folder: Path) -> dict[str, list]:
    """Every scalar of one run folder, read back by TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    reader = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    reader.Reload()
    return {tag: reader.Scalars(tag) for tag in reader.Tags()["scalars"]}, reader


@pytest.mark.usefixtures("tensorflow_free_reader")
def test_tensorboard_round_trip_through_tensorboards_reader(source, tmp_path, capsys):
    from tensorboard.plugins.hparams import metadata

    code, text, _ = export(capsys, "--tensorboard", tmp_path / "tb", source, "--status", "ok,oom")
    assert code == 0 and "wrote 2 runs" in text
    record = read_run_file(source)
    for run in record.runs[:2]:
        values, reader = scalars(tmp_path / "tb" / f"batch_{run.batch_size:05d}_seed_{run.seed}")
        loss = values["loss/by_step"]
        assert [e.step for e in loss] == run.steps["step"].tolist()
        np.testing.assert_allclose([e.value for e in loss], run.steps["loss"], rtol=1e-6)
        examples = values["loss/by_examples"]
        assert [e.step for e in examples] == np.cumsum(run.steps["batch_size"]).tolist()
        np.testing.assert_allclose([e.value for e in values["lr/by_step"]], run.steps["lr"], rtol=1e-6)
        if not len(run.epochs["epoch"]):  # the oom run ended in its first epoch: no epoch scalars
            assert not [tag for tag in values if tag.startswith(("epoch/", "memory/"))]
        for name in ("train_loss", "epoch_time", "samples_per_s") if len(run.epochs["epoch"]) else ():
            np.testing.assert_allclose([e.value for e in values[f"epoch/{name}"]], run.epochs[name], rtol=1e-6)
            memory = values["memory/rss_peak_bytes"]
            np.testing.assert_allclose([e.value for e in memory], run.epochs["rss_peak_bytes"], rtol=1e-6)
        figures = run.figures
        assert math.isclose(values["summary/final_loss"][0].value, figures.final_loss, rel_tol=1e-6)
        assert math.isclose(values["summary/steady_samples_per_s"][0].value, figures.samples_per_s, rel_tol=1e-6)
        content = reader.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
        hparams = metadata.parse_session_start_info_plugin_data(content).hparams
        assert hparams["batch_size"].number_value == run.batch_size and hparams["seed"].number_value == run.seed
        assert hparams["lr_rule"].string_value == run.attrs["lr_rule"]
        assert math.isclose(hparams["lr"].number_value, run.attrs["lr_peak"])
    ok = scalars(tmp_path / "tb" / "batch_00016_seed_0")[0]
    np.testing.assert_allclose([e.value for e in ok["metrics/val_mae"]], record.runs[0].metrics["val_mae"], rtol=1e-6)
    assert [e.step for e in ok["eval/val_loss"]] == record.runs[0].evals["steps"].tolist()
    _, root = scalars(tmp_path / "tb")
    experiment = metadata.parse_experiment_plugin_data(root.SummaryMetadata("_hparams_/experiment").plugin_data.content)
    assert {m.name.tag for m in experiment.metric_infos} >= {"summary/final_loss", "summary/time_to_target_s"}
    assert {h.name for h in experiment.hparam_infos} >= {"batch_size", "lr", "lr_rule", "optimizer", "seed"}

    code, _, err = export(capsys, "--tensorboard", tmp_path / "tb", source, "--batch", "16")
    assert code == 2 and "already holds event files" in err and "--overwrite" in err
    assert export(capsys, "--tensorboard", tmp_path / "tb", source, "--batch", "16", "--overwrite")[0] == 0
    assert len(list((tmp_path / "tb" / "batch_00016_seed_0").glob("events.out.tfevents.*"))) == 1


def test_tensorboard_folders_of_several_files_start_with_the_file_name(tmp_path, capsys):
    a, b = (write(tmp_path / name, source_events()) for name in ("a.h5", "b.h5"))
    assert export(capsys, "--tensorboard", tmp_path / "tb", a, b, "--batch", "16")[0] == 0
    folders = sorted(p.parent.relative_to(tmp_path / "tb") for p in (tmp_path / "tb").rglob("events.out.tfevents.*"))
    assert folders == [Path("."), Path("a/batch_00016_seed_0"), Path("b/batch_00016_seed_0")]


def test_tensorboard_export_never_loads_tensorflow(source, tmp_path):
    code = (
        "import sys\nfrom batchlab.core.cli import main\n"
        f"assert main(['export', '--tensorboard', {str(tmp_path / 'tb')!r}, {str(source)!r}]) == 0\n"
        "print('loaded:' + ','.join(m for m in ('tensorflow', 'keras') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "loaded:"


def test_without_tensorboard_it_says_how_to_install_it(source, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard.summary.writer.record_writer", None)  # as if not installed
    code, _, err = export(capsys, "--tensorboard", tmp_path / "tb", source)
    assert code == 2 and err.count("\n") == 1 and "pip install 'batchlab[tensorboard]'" in err


def test_the_format_document_names_what_an_exported_file_adds(source, tmp_path, capsys):
    """docs/runfile-format.md's *Exported files* table against real exports: every root and run attribute an
    export adds (full and summary-only) is documented with its type, and nothing else is added."""
    from tests.core.test_runfile import _attr_type, _doc_table, _doc_tables

    tables = _doc_tables()
    root, run_table, export_table = (_doc_table(tables, h) for h in ("Root attributes", "Run attributes", "Exported"))
    for name, args in (("full.h5", ()), ("summary.h5", ("--summary-only",))):
        assert export(capsys, tmp_path / name, source, *args)[0] == 0
        with h5py.File(tmp_path / name, "r") as f, h5py.File(source, "r") as g:
            added = {k: _attr_type(v) for k, v in f.attrs.items() if k not in root}
            assert set(added) == {"exported", "export_content", "export_selection", "export_sources"}
            run = f["runs/run_000"].attrs
            added.update({k: _attr_type(v) for k, v in run.items() if k not in g["runs/run_000"].attrs})
            assert "source_file" in added and ("summary_step_time" in added) == bool(args)
        for attr, kind in added.items():
            assert attr in export_table and export_table[attr] == kind, f"{attr}: file {kind}"
        assert not set(added) & set(run_table)
