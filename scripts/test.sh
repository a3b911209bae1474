#!/usr/bin/env bash
# Install BatchLab with its test tools and run lint plus the whole test suite (headless, CPU only).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh test
# Qt's offscreen platform needs a few system libraries that desktop machines always have; a bare
# server image may not. Install them only when Qt cannot start and we are allowed to.
if ! QT_QPA_PLATFORM=offscreen .venv/bin/python -c 'from PySide6.QtWidgets import QApplication; QApplication([])' >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq libegl1 libgl1 libfontconfig1 libxkbcommon0 libglib2.0-0 libdbus-1-3 >/dev/null
    else
        echo "Qt cannot start offscreen: install libegl1 libgl1 libfontconfig1 libxkbcommon0 libglib2.0-0" >&2
        exit 1
    fi
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/lint-imports --no-cache >/dev/null || .venv/bin/lint-imports --no-cache  # the layers (pyproject.toml); quiet when kept
export CUDA_VISIBLE_DEVICES=-1 TF_CPP_MIN_LOG_LEVEL=2
# One process by default: two xdist workers (PYTEST_WORKERS=2; whole files per worker) measured slower here, since
# every training child already uses both cores (README, Development). The 25 slowest tests end every log.
exec .venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-0}" --dist loadfile --durations=25 "$@"
