"""Run-file paths: one set of rules for the CLI's --out, the window's field and the writer."""

import pytest
from batchlab.core.errors import SpecError
from batchlab.core.paths import check_run_file, default_run_file, is_default_run_file, run_file_problem
from batchlab.core.runfile import RunFileWriter


def test_default_name_is_recognised_and_lives_in_the_folder(tmp_path):
    path = default_run_file("mnist-mlp", tmp_path)
    assert path.parent == tmp_path and path.name.startswith("mnist-mlp-") and is_default_run_file(path)
    assert not is_default_run_file(tmp_path / "mine.h5")


@pytest.mark.parametrize(
    ("name", "kwargs", "phrase"),
    [
        ("", {}, "choose a run file"),
        ("x.csv", {}, "does not end in .h5 or .hdf5"),
        ("old.h5", {}, "already exists"),
        ("missing/deeper/x.h5", {"create_folder": True}, "does not exist"),
        ("missing/x.h5", {}, "does not exist"),
        ("folder.h5", {"overwrite": True}, "is a folder"),
    ],
)
def test_unusable_paths_are_refused_by_the_writer_with_the_same_message(tmp_path, name, kwargs, phrase):
    (tmp_path / "old.h5").write_bytes(b"keep")
    (tmp_path / "folder.h5").mkdir()
    path = str(tmp_path / name) if name else ""
    problem = run_file_problem(path, **kwargs)
    assert problem is not None and problem.field == "out" and phrase in problem.message
    if name and not kwargs.get("create_folder"):
        with pytest.raises(SpecError) as e:
            RunFileWriter(path, overwrite=kwargs.get("overwrite", False))
        assert e.value.message == problem.message
    assert (tmp_path / "old.h5").read_bytes() == b"keep"


def test_home_is_expanded_and_one_missing_folder_is_created_when_allowed(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert check_run_file("~/a.h5") == tmp_path / "a.h5"
    assert check_run_file("~/runs/b.h5", create_folder=True) == tmp_path / "runs" / "b.h5"
    assert (tmp_path / "runs").is_dir()
    with RunFileWriter("~/c.h5") as writer:
        assert writer.path == tmp_path / "c.h5"
    assert (tmp_path / "c.h5").is_file()
