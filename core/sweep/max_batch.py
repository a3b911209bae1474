"""`batchlab max-batch`: the largest batch size that trains on this device, each try in its own child.

The search is core/analysis/batch_search.py; here each try runs in a fresh training child
(core/training/batch_probe.py, spawned like the sweep's runs), so running out of memory ends one
child only. On the host the limit is a cap on the child's resident memory (default: a fraction of
the memory available when the search starts): the parent watches the child and kills it when it
passes the cap, or when the machine's available memory falls below a reserve, so the search stops
before the machine swaps and never wakes the kernel's OOM killer. On a GPU, TensorFlow's own
out-of-memory error answers first.
"""

from __future__ import annotations

import math
import multiprocessing
import re
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from batchlab.core.analysis.batch_search import DEFAULT_MARGIN, SearchResult, Trial
from batchlab.core.errors import SpecError
from batchlab.core.spec import RunSpec, SweepSpec
from batchlab.core.training.batch_probe import PROBE_ANSWER, batch_probe_main

POLL_SECONDS = 0.02  # how often the parent reads the child's memory; allocation between reads overshoots little
DEFAULT_CAP_FRACTION = 0.8  # default cap: this fraction of the memory available at the start
HOST_RESERVE_FRACTION = 0.05  # a try is ended when available memory falls below this fraction of the total
PROBE_STEPS = 3  # training steps of a search try (the first creates the optimizer state and traces)
VERIFY_STEPS = 20  # training steps of the verification of the answer
TRY_TIMEOUT_SECONDS = 900.0

_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 1 << 10, "m": 1e6, "mb": 1e6, "mib": 1 << 20}
_UNITS |= {"g": 1e9, "gb": 1e9, "gib": 1 << 30, "t": 1e12, "tb": 1e12, "tib": 1 << 40}


class MaxBatchError(Exception):
    """A try failed for a reason other than memory (the search cannot go on)."""


class SearchStopped(Exception):
    """The user stopped the search (BatchProber.stop): the try running was ended, there is no answer."""


def parse_memory_cap(value: str | None, available: int | None = None) -> int:
    """The host memory cap in bytes from "80%" (of the available memory), "6GiB", "512MiB", "2GB" or bytes.

    None or "" gives DEFAULT_CAP_FRACTION of the available memory. SpecError names the field otherwise.
    """
    available = int(psutil.virtual_memory().available) if available is None else available
    text = "" if value is None else str(value).strip().lower().replace(" ", "")
    if not text:
        return int(DEFAULT_CAP_FRACTION * available)
    match = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[0-9]+)?)(%|[a-z]*)", text)
    unit = match.group(2) if match else None
    if match is None or (unit != "%" and unit not in _UNITS):
        raise SpecError(
            "memory_cap", f"{value!r} is not a memory size; use e.g. 80% (of available memory), 6GiB, 512MiB or bytes"
        )
    number = float(match.group(1))
    cap = number / 100 * available if unit == "%" else number * _UNITS[unit]
    if unit == "%" and not 0 < number <= 100:
        raise SpecError("memory_cap", f"{value!r} is not a share of the available memory; use 1% to 100%")
    if cap < 64 * (1 << 20):
        raise SpecError("memory_cap", f"{value!r} is under 64 MiB; TensorFlow alone needs more; use e.g. 4GiB")
    return int(cap)


def parse_margin(value: str | float | None) -> float:
    """The safety margin off the largest size that fitted: a fraction from 0 to 0.9; None or "" gives
    batch_search.DEFAULT_MARGIN. SpecError names the field otherwise (the CLI's --margin, the window's field)."""
    text = "" if value is None else str(value).strip()
    if not text:
        return DEFAULT_MARGIN
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not 0 <= number <= 0.9:
        raise SpecError("margin", f"{value!r} is not allowed; use a fraction from 0 to 0.9, e.g. 0.1")
    return number


def _tree_rss(process: psutil.Process) -> int:
    """Resident bytes of a process and its children (0 once it is gone)."""
    try:
        procs = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


class BatchProber:
    """try_batch(b, verify) for find_max_batch: one child per try, killed at the host memory cap."""

    def __init__(
        self,
        spec: SweepSpec,
        cap_bytes: int,
        log_dir: str | Path | None = None,
        on_trial: Callable[[Trial], None] | None = None,
    ):
        self.spec = spec
        self.cap_bytes = int(cap_bytes)
        self.reserve_bytes = int(HOST_RESERVE_FRACTION * psutil.virtual_memory().total)
        self.on_trial = on_trial
        self._ctx = multiprocessing.get_context("spawn")
        self._log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="batchlab-maxbatch-"))
        self._count = 0
        self._stopped = threading.Event()
        self.trials: list[Trial] = []

    def stop(self) -> None:
        """Thread-safe: end the running try's child now and stop the search (the caller gets SearchStopped)."""
        self._stopped.set()

    def __call__(self, batch_size: int, verify: bool) -> Trial:
        if self._stopped.is_set():
            raise SearchStopped(f"stopped before batch {batch_size}")
        try:
            trial = self._try(batch_size, verify)
        except MaxBatchError as e:
            # A failure that is not worded as out-of-memory (e.g. cuDNN failing to allocate its workspace)
            # at a size above one that trained is the device's limit too; shown with its own words.
            if not any(t.ok and t.batch_size < batch_size for t in self.trials):
                raise
            trial = Trial(batch_size, False, verify, message=f"failed above a size that trained: {e}")
        self.trials.append(trial)
        if self.on_trial is not None:
            self.on_trial(trial)
        return trial

    def _try(self, batch_size: int, verify: bool) -> Trial:
        from batchlab.core.sweep.processes import _death_message, start_child

        self._count += 1
        log_path = self._log_dir / f"try_{self._count:03d}_b{batch_size}.log"
        run = RunSpec(index=0, batch_size=batch_size, seed=self.spec.seeds[0], sweep=self.spec)
        receiver, sender = self._ctx.Pipe(duplex=False)
        steps = VERIFY_STEPS if verify else PROBE_STEPS
        child = self._ctx.Process(
            target=batch_probe_main,
            args=(run.to_dict(), sender, str(log_path), steps),
            daemon=True,
            name=f"batchlab-maxbatch-{batch_size}",
        )
        start_child(child)
        sender.close()
        watched = psutil.Process(child.pid)
        deadline = time.monotonic() + TRY_TIMEOUT_SECONDS
        peak_rss, killed = 0, ""
        answer = None
        try:
            while answer is None and not killed:
                if receiver.poll(POLL_SECONDS):
                    answer = receiver.recv()
                    break
                rss = _tree_rss(watched)
                peak_rss = max(peak_rss, rss)
                if rss > self.cap_bytes:
                    killed = (
                        f"over the host memory cap ({rss / (1 << 20):,.0f} MiB > {self.cap_bytes / (1 << 20):,.0f} MiB)"
                    )
                elif psutil.virtual_memory().available < self.reserve_bytes:
                    killed = "the machine's available memory fell below its reserve (it would swap)"
                elif self._stopped.is_set():
                    killed = "stopped"
                elif time.monotonic() > deadline:
                    raise MaxBatchError(f"batch {batch_size}: the try did not finish in {TRY_TIMEOUT_SECONDS:.0f} s")
                elif not child.is_alive() and not receiver.poll(0):
                    break
        except EOFError:
            answer = None
        finally:
            if killed or answer is None:
                child.kill()
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
                child.join()
        if killed == "stopped":
            raise SearchStopped(f"stopped during batch {batch_size}")
        if killed:
            return Trial(batch_size, False, verify, peak_bytes=peak_rss, message=killed)
        if answer is None or answer.get("type") != PROBE_ANSWER:
            died = _death_message(child.exitcode, log_path)
            if child.exitcode is not None and child.exitcode < 0:  # killed by a signal: the host's OOM killer
                return Trial(batch_size, False, verify, message=died)
            raise MaxBatchError(f"batch {batch_size}: {died}")
        if answer["status"] == "ok":
            return Trial(batch_size, True, verify, int(answer["peak_bytes"]), float(answer["step_time"]))
        if answer["status"] == "oom":
            return Trial(batch_size, False, verify, message=str(answer.get("message") or "out of memory"))
        raise MaxBatchError(f"batch {batch_size}: {answer.get('message') or 'the try failed'} (log: {log_path})")


def describe_trial(trial: Trial) -> str:
    """One line per try, for the terminal."""
    kind = "verify" if trial.verify else "try"
    steps = VERIFY_STEPS if trial.verify else PROBE_STEPS
    if trial.ok:
        peak = f"peak {trial.peak_bytes / (1 << 20):,.0f} MiB" if trial.peak_bytes > 0 else "peak unknown"
        t = trial.step_time
        step = "" if not math.isfinite(t) else f", step {t:.3g} s" if t >= 1 else f", step {t * 1e3:.3g} ms"
        return f"  {kind:6s} batch {trial.batch_size:>7,d}: fits ({steps} steps + validation; {peak}{step})"
    return f"  {kind:6s} batch {trial.batch_size:>7,d}: does not fit: {trial.message}"


def describe_result(result: SearchResult, cap_bytes: int = 0) -> list[str]:
    """The answer in words, as `batchlab max-batch` prints it and the window shows it (the last line: the size)."""
    mib = 1 << 20
    if result.batch_size is None:
        within = f" within {cap_bytes / mib:,.0f} MiB" if cap_bytes else ""
        return [f"even batch 1 does not fit on this device{within}"]
    check = result.verification
    peak = f"peak {check.peak_bytes / mib:,.0f} MiB" if check and check.peak_bytes > 0 else "peak unknown"
    if result.limited_by == "data":
        return [
            f"max batch: {result.batch_size:,} (all {result.limit:,} samples fit in one batch; memory is not the "
            f"limit; verified with {VERIFY_STEPS} training steps and a validation pass, {peak})"
        ]
    text = f"largest batch that fitted a {PROBE_STEPS}-step try: {result.largest_ok:,}"
    if result.smallest_oom is not None:
        text += f" (batch {result.smallest_oom:,} did not)"
    failed = result.failed_verifications
    if failed:
        text += f"; {', '.join(f'{b:,}' for b in failed)} did not fit the {VERIFY_STEPS}-step verification"
    return [
        text,
        f"max batch: {result.batch_size:,} ({result.margin:.0%} safety margin; verified with {VERIFY_STEPS} training "
        f"steps and a validation pass, {peak})",
    ]


def search_max_batch(
    spec: SweepSpec,
    cap_bytes: int,
    limit: int,
    start: int,
    margin: float,
    on_checked: Callable[[dict], None] | None = None,
    on_trial: Callable[[Trial], None] | None = None,
) -> SearchResult:
    """The whole search as `batchlab max-batch` runs it: the sweep's scheduler checks the data and builds the
    model in its probe (SpecError if bad; `on_checked(environment)` after), then each try in its own child.
    MaxBatchError if a try fails for a reason other than memory."""
    from batchlab.core.analysis.batch_search import find_max_batch
    from batchlab.core.sweep.runner import SweepRunner

    environment = SweepRunner(spec).preflight()
    if on_checked is not None:
        on_checked(environment)
    prober = BatchProber(spec, cap_bytes, on_trial=on_trial)
    return find_max_batch(prober, limit=limit, start=start, margin=margin)


def describe_memory(result: SearchResult) -> str:
    """The straight line through the tries' peak memory, "peak(B) = m0 MiB + m1 MiB x B"; "" without one."""
    from batchlab.core.analysis.memory_fit import fit_memory

    mib = 1 << 20
    fits = [t for t in result.trials if t.ok and t.peak_bytes > 0]
    memory = fit_memory([t.batch_size for t in fits], [t.peak_bytes for t in fits])
    if memory is None:
        return ""
    return f"memory of the tries: peak(B) = {memory.m0 / mib:,.0f} MiB + {memory.m1 / mib:.3g} MiB x B"
