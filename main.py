"""BatchLab entry point: `batchlab` opens the window; `batchlab sweep|report|info|presets|max-batch|lr-find|profile|
export` run headless.

Kept import-light on purpose: the window process never imports TensorFlow, and the
training child (spawned with multiprocessing) re-imports this module.
"""

from __future__ import annotations

import sys

# every subcommand of core/cli.py (tests/core/test_cli.py checks the two lists agree); anything else opens the window
CLI_COMMANDS = (
    "sweep",
    "report",
    "info",
    "presets",
    "max-batch",
    "lr-find",
    "profile",
    "bench",
    "compare",
    "export",
    "-h",
    "--help",
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in CLI_COMMANDS:
        from batchlab.core.cli import main as cli_main

        return cli_main(argv)
    from batchlab.gui.app import run_app

    return run_app(argv)


if __name__ == "__main__":
    sys.exit(main())
