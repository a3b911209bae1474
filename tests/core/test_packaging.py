"""BatchLab as a user installs it: a wheel, in a fresh environment, run from anywhere but the clone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from batchlab.core.runfile.reader import read_run_file

REPO = Path(__file__).resolve().parents[2]
# What the wheel is built from (pyproject.toml's package-dir maps the root to `batchlab`).
SOURCES = ("pyproject.toml", "README.md", "main.py", "core", "gui", "resources", "docs")
TOP_LEVEL_FOLDERS = ("core", "gui", "resources")


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel_build(tmp_path_factory) -> tuple[Path, str]:
    """The wheel pip builds from a copy of the clone (so the build leaves nothing in the clone), and what the build
    printed."""
    root = tmp_path_factory.mktemp("build")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    dist = root / "dist"
    # The venv's setuptools builds it: no download, the same backend `pip install .` uses.
    build = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", dist, src]
    )
    (built,) = dist.glob("batchlab-*.whl")
    return built, build.stdout + build.stderr


@pytest.fixture(scope="module")
def wheel(wheel_build) -> Path:
    return wheel_build[0]


def test_every_package_folder_is_listed_in_pyproject():
    """pyproject.toml lists the packages by name: a new folder of core/ or gui/ left out of the list is missing
    from the wheel (core/commands/ and core/export/ were), and `batchlab` then fails only once installed."""
    tomllib = pytest.importorskip("tomllib")
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {p.parent.relative_to(REPO) for top in ("core", "gui") for p in (REPO / top).rglob("__init__.py")}
    missing = {".".join(("batchlab", *folder.parts)) for folder in folders} - listed
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"


def test_building_the_wheel_prints_no_warning_about_our_packaging(wheel_build):
    # The license as a TOML table and docs/ not listed as a package each printed a screen of setuptools warnings
    # on a newcomer's first scripts/run.sh.
    _, output = wheel_build
    ours = [line for line in output.splitlines() if "Warning" in line and "Location 'file" not in line]
    assert not ours, "\n".join(ours)


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv outside the clone with only the wheel installed; the heavy dependencies
    (TensorFlow, Qt) are borrowed from this venv's site-packages through a .pth line."""
    env = tmp_path_factory.mktemp("venv") / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", env])
    purelib = _run([env / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    site = Path(purelib.stdout.strip())
    # A plain path line: .pth files in the borrowed folder (this clone's editable install) are not read.
    (site / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", env / "bin" / "python", "install", "--no-deps", "--no-index", wheel])
    return env


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2"}


def test_wheel_installs_under_one_name_with_the_bundled_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"batchlab", wheel.name.split("-py3")[0] + ".dist-info"}, tops
    assert "batchlab/resources/mnist_subset.npz" in names
    assert "batchlab/main.py" in names and "batchlab/core/spec.py" in names and "batchlab/gui/app.py" in names
    assert "batchlab/docs/runfile-format.md" in names  # Help > The run file format


def test_installed_wheel_runs_a_sweep_on_the_bundled_data_outside_the_clone(venv, tmp_path):
    site = Path(
        _run(
            [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    for name in (*TOP_LEVEL_FOLDERS, "main.py"):
        assert not (site / name).exists(), f"the install put a top-level {name} into site-packages"
    where = _run(
        [venv / "bin" / "python", "-c", "from batchlab.core import datasets as d; print(d.__file__, d.bundled_path())"],
        cwd=tmp_path,
        env=_clean_env(),
    ).stdout.split()
    assert all(Path(p).is_relative_to(site) for p in where), where  # the installed copy, not the clone
    assert Path(where[1]).is_file()
    out = tmp_path / "x.h5"
    args = ["sweep", "--preset", "mnist-mlp", "--samples", "256", "--val-samples", "64", "--epochs", "1"]
    args += ["--batch-sizes", "64", "--device", "cpu", "--out", out]
    result = subprocess.run(
        [str(venv / "bin" / "batchlab"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=_clean_env(),
    )
    assert result.returncode == 0, result.stderr
    record = read_run_file(out)
    assert record.status == "complete"
    assert [r.status for r in record.runs] == ["ok"]
    assert record.spec["data"] == "bundled"
