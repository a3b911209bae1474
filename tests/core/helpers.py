"""Test helpers. Keras models are built in a subprocess so the test process never imports TensorFlow
(the GUI tests check that the window process stays free of it)."""

import subprocess
import sys
import textwrap
from pathlib import Path


def save_keras_model(build_code: str, path: Path) -> Path:
    """Run `build_code` (which must define `model`) in a fresh Python and save the model to `path`."""
    script = "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '-1'\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
    script += "import keras\n" + textwrap.dedent(build_code) + f"\nmodel.save({str(path)!r})\n"
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=300)
    return path
