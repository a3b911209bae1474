"""The architecture's two promises: core/ never uses Qt, and the parent side never loads TensorFlow."""

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QT_MODULES = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph")
# The training child's package: the only modules that may import TensorFlow.
CHILD_PACKAGE = "batchlab.core.training"


def _core_modules() -> list[tuple[str, Path]]:
    """(import name, path) of every module under core/, e.g. ("batchlab.core.sweep.runner", ...)."""
    out = []
    for path in sorted((REPO / "core").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(("batchlab", *parts)), path))
    return out


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_never_imports_qt():
    modules = _core_modules()
    assert len(modules) > 10
    for name, path in modules:
        bad = [m for m in _imported_modules(path) if m.split(".")[0] in QT_MODULES or m.startswith("batchlab.gui")]
        assert not bad, f"{name} imports {bad}"


def test_parent_side_modules_do_not_load_tensorflow():
    parent_modules = [
        name for name, _ in _core_modules() if name != CHILD_PACKAGE and not name.startswith(CHILD_PACKAGE + ".")
    ]
    assert "batchlab.core.sweep.runner" in parent_modules
    code = (
        "import sys, importlib\n"
        f"for m in {parent_modules!r}: importlib.import_module(m)\n"
        "import batchlab.main\n"
        "loaded = sorted(m for m in ('tensorflow', 'keras') if m in sys.modules)\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"parent-side modules loaded {result.stdout.strip()}"
