"""The command line's prose fits the terminal (an 80-column one wrapped every 100-character line)."""

from __future__ import annotations

from batchlab.core.text_width import MAX_WIDTH, text_width

from tests.core.test_cli import batchlab
from tests.gui.synthetic import write_run_file


def test_prose_follows_the_terminal_width_up_to_100(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert text_width() == 79
    monkeypatch.setenv("COLUMNS", "200")
    assert text_width() == MAX_WIDTH


def test_report_prose_fits_80_columns(tmp_path):
    path = write_run_file(tmp_path / "r.h5", batch_sizes=(16, 64))
    done = batchlab("report", path, env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    prose = [line for line in done.stdout.splitlines() if line.startswith(("- ", "  ")) and line.lstrip()[:1].isalpha()]
    assert len(prose) > 5
    assert [line for line in prose if len(line) > 79] == []
    # the runs table: two-line headers on a narrow terminal (108 columns with one-line headers)
    start = next(i for i, line in enumerate(done.stdout.splitlines()) if line.rstrip().endswith("mem steady"))
    table = done.stdout.splitlines()[start : start + 4]
    assert table[1].split()[:2] == ["batch", "seed"] and max(len(line) for line in table) <= 80, table
    # the time account: runs as columns (95 columns with a run per row)
    lines = done.stdout.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("Where each run's time went")))
    account = lines[head + 1 : head + 15]
    assert account[0].split() == ["b16", "b64"] and account[1].startswith("start")
    assert account[-1].startswith("unacc") and max(len(line) for line in account) <= 80, account
    wide = batchlab("report", path, env={"COLUMNS": "200"})
    assert max(len(line) for line in wide.stdout.splitlines() if line.startswith("- ")) > 79  # 100 where it fits
