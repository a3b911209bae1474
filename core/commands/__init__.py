"""Command-line commands that live in their own module; core/cli.py lists them in COMMAND_MODULES.

Each module has ``NAME`` (the subcommand), ``add_parser(sub)`` (adds its argparse subparser to ``sub``)
and ``run(args) -> int`` (the exit code). Errors a user can cause are raised as SpecError (core/errors.py)
and printed by cli.main as one line.
"""
