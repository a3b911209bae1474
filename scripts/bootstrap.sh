#!/usr/bin/env bash
# Create .venv (Python >= 3.10) and install BatchLab into it; extras as arguments, e.g. "test".
# Re-running is cheap: pip only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "BatchLab needs Python 3.10 or newer")'
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
extras=""
if [ $# -gt 0 ]; then extras="[$(IFS=,; echo "$*")]"; fi
# -qq: errors only. setuptools prints an informational notice on every editable install ("Editable
# installation... folders with the same name as your package"), which a newcomer would read as a problem.
.venv/bin/python -m pip install -qq --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -qq --disable-pip-version-check -e ".${extras}"
