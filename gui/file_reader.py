"""Reading a run file off the GUI thread, so the window stays responsive while a 500-run file is read.

The read itself is core's (SweepData.from_file: HDF5, the runs' figures; no Qt). A one-thread executor runs
it; results come back to the GUI thread through queued signals (the Orange3 pattern: progress only when it
moved enough to matter). h5py holds the GIL inside each HDF5 call, but one call reads one column of one run
(well under a millisecond), so the GUI thread gets the interpreter back within Python's switch interval:
measured in docs/benchmarks.md ("Opening and comparing a 504-run file").

After the HDF5 reads come ~0.25 s of numpy (the runs built from the record, their figures), whose sorts and
partitions give the GIL up and take it back so often that CPython never asks the thread to hand it over (see
gui/figure_worker.py): the GUI thread waited out the end of a 504-run read (a 121 ms gap for 4 ms of its work,
in two opens of six). So the read pauses 0.2 ms after every fourth run there (`give_way`): enough for a
waiting GUI thread to take the interpreter, which then waits at most four runs' work (~1-2 ms).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from batchlab.core.errors import SpecError
from batchlab.core.model import SweepData
from PySide6.QtCore import QObject, Signal

PROGRESS_EVERY_S = 0.1  # a progress signal at most this often (s): more would only flood the event loop
GIVE_WAY_S = 0.0002  # the reader's pause, in which a GUI thread waiting for the GIL takes it
GIVE_WAY_EVERY = 4  # runs of numpy work between pauses (each pause after every run cost 8% of a 504-run read)


def give_way_every(runs: int = GIVE_WAY_EVERY) -> Callable[[], None]:
    """A `pause` for SweepData.from_file: every `runs` calls, sleep GIVE_WAY_S without the GIL, so that a thread
    waiting for it gets it then, not after the reader's work."""
    calls = [0]

    def pause() -> None:
        calls[0] += 1
        if calls[0] % runs == 0:
            time.sleep(GIVE_WAY_S)

    return pause


def emit_if_alive(signal, *args) -> None:
    """Emit from a worker thread; nothing if the window (and the signal's object) was deleted meanwhile."""
    try:
        signal.emit(*args)
    except RuntimeError:  # the object was deleted while the thread worked
        pass


class ReadCancelled(Exception):
    """A newer read (or cancel()) replaced this one; it stops after the run it is reading."""


def read_sweep(
    path: str, label: str, progress: Callable[[int, int], None] | None = None, pause: Callable[[], None] | None = None
) -> SweepData:
    """The one read of a run file, in the thread or not (the same numbers either way)."""
    return SweepData.from_file(path, label=label or Path(path).name, progress=progress, pause=pause)


class FileReader(QObject):
    """Reads one run file at a time in a worker thread; a new read (or cancel) replaces the one in flight.

    Signals arrive on the GUI thread, only for the latest read: `progressed(done, total, path)` (runs read),
    then `read(data)` or `failed(path, message)` (the one-line message of a file that cannot be read).
    """

    progressed = Signal(int, int, str)
    read = Signal(object)  # SweepData
    failed = Signal(str, str)
    # from the worker thread, tagged with the read's number; the slots drop those of replaced reads
    _progress = Signal(int, int, int, str)
    _done = Signal(int, object)
    _error = Signal(int, str, str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batchlab-read")
        self._generation = 0
        self.path: str | None = None  # the file being read (None when none is)
        self._progress.connect(self._on_progress)
        self._done.connect(self._on_done)
        self._error.connect(self._on_error)

    @property
    def busy(self) -> bool:
        return self.path is not None

    def start(self, path: str, label: str = "") -> None:
        """Read `path` in the worker thread; a read still in flight is cancelled (its result never shows)."""
        self._generation += 1
        self.path = path
        self._executor.submit(self._work, self._generation, path, label)

    def cancel(self) -> None:
        """Forget the read in flight: it stops after its current run and nothing it read is shown."""
        self._generation += 1
        self.path = None

    def shutdown(self) -> None:
        """The window closes: cancel and let the thread end (it stops within one run's read)."""
        self.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _work(self, generation: int, path: str, label: str) -> None:
        last = [0.0]

        def progress(done: int, total: int) -> None:
            if generation != self._generation:
                raise ReadCancelled
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or done == total:
                last[0] = now
                self._emit(self._progress, generation, done, total, path)

        if generation != self._generation:
            return
        try:
            data = read_sweep(path, label, progress, pause=give_way_every())
        except ReadCancelled:
            return
        except (SpecError, OSError) as e:
            self._emit(self._error, generation, path, str(e))
            return
        except Exception as e:  # noqa: BLE001 - a file h5py chokes on mid-way: still one line, never a dead thread
            self._emit(self._error, generation, path, f"{path} could not be read ({type(e).__name__}: {e})")
            return
        self._emit(self._done, generation, data)

    _emit = staticmethod(emit_if_alive)  # the window may be deleted while the thread reads

    def _on_progress(self, generation: int, done: int, total: int, path: str) -> None:
        if generation == self._generation:
            self.progressed.emit(done, total, path)

    def _on_done(self, generation: int, data: SweepData) -> None:
        if generation == self._generation:
            self.path = None
            self.read.emit(data)

    def _on_error(self, generation: int, path: str, message: str) -> None:
        if generation == self._generation:
            self.path = None
            self.failed.emit(path, message)
