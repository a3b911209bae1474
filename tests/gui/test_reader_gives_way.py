"""The file reader thread pauses during a read's numpy work so that the GUI thread gets the interpreter
(gui/file_reader.py): a 504-run read once kept it waiting 121 ms for 4 ms of its own work."""

from __future__ import annotations

from batchlab.gui import file_reader


def test_the_readers_pause_sleeps_every_fourth_run(monkeypatch):
    slept = []
    monkeypatch.setattr(file_reader.time, "sleep", slept.append)
    pause = file_reader.give_way_every(4)
    for _ in range(10):
        pause()
    assert slept == [file_reader.GIVE_WAY_S] * 2


def test_a_threaded_read_pauses_and_gives_the_same_numbers(main_window, tmp_path, monkeypatch):
    from tests.gui.conftest import wait_until
    from tests.gui.synthetic import write_run_file

    made = []
    real = file_reader.give_way_every

    def counted(runs=file_reader.GIVE_WAY_EVERY):
        pause = real(runs)

        def wrapped():
            made.append(1)
            pause()

        return wrapped

    monkeypatch.setattr(file_reader, "give_way_every", counted)
    path = write_run_file(tmp_path / "r.h5", batch_sizes=(16, 32), seeds=(0, 1))
    w = main_window
    w.read_in_thread = True
    assert w.open_file(path)
    wait_until(lambda: not w.readers["main"].busy and w.data is not None and len(w.data.runs) == 4, 30)
    assert len(made) == 8  # a pause after each run built and each run's figures
    plain = file_reader.read_sweep(path, "r.h5")
    assert [r.figures.epoch_time for r in w.data.ordered_runs()] == [r.figures.epoch_time for r in plain.ordered_runs()]
