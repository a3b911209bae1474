"""The architecture's two promises: core/ never uses Qt, and the parent side never loads TensorFlow."""

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QT_MODULES = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "gui")
# Modules that import TensorFlow; only the training child may load them.
CHILD_ONLY = {"core.trainer", "core.workloads"}


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_never_imports_qt():
    for path in sorted((REPO / "core").glob("*.py")):
        bad = [m for m in _imported_modules(path) if m.split(".")[0] in QT_MODULES]
        assert not bad, f"{path.name} imports {bad}"


def test_parent_side_modules_do_not_load_tensorflow():
    parent_modules = sorted(
        f"core.{p.stem}"
        for p in (REPO / "core").glob("*.py")
        if p.stem != "__init__" and f"core.{p.stem}" not in CHILD_ONLY
    )
    code = (
        "import sys, importlib\n"
        f"for m in {parent_modules!r}: importlib.import_module(m)\n"
        "import main\n"
        "loaded = sorted(m for m in ('tensorflow', 'keras') if m in sys.modules)\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"parent-side modules loaded {result.stdout.strip()}"
