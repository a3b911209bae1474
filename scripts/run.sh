#!/usr/bin/env bash
# Install what BatchLab needs (first time only) and open the window; arguments go to batchlab.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/batchlab "$@"
