"""The largest batch that fits, found by trying sizes: pure search logic, testable on a fake device.

`find_max_batch` asks a `try_batch(batch_size, verify)` callable (in BatchLab: a child process
that trains a few full steps, optimizer state and a validation pass included, see
core/sweep/max_batch.py). It grows the batch by powers of two until one runs out of memory (or
the data's size is reached), bisects between the largest size that fitted and the smallest that
did not, takes a safety margin off the largest fit and verifies that answer with a longer try. A
size whose verification fails is never returned: the answer shrinks by the margin again and is
verified again, so the size reported is always one that just ran.

Why a margin: a real run lives longer than a probe. Over many epochs the allocator's pools
fragment and grow, the input pipeline's prefetch buffers fill, autotuning may pick a kernel with a
larger workspace, and other processes take memory too. DEFAULT_MARGIN below the largest size that
fitted leaves room for that.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_START = 8  # first size tried (samples); smaller sizes are tried only if it does not fit
DEFAULT_MARGIN = 0.10  # the answer is the largest size that fitted less this fraction
DEFAULT_RESOLUTION = 0.05  # bisection stops when the bracket is within this fraction of the size that fits


@dataclass(frozen=True)
class Trial:
    """One try: did `batch_size` fit, and what it measured (peak bytes, -1 unknown; step time s)."""

    batch_size: int
    ok: bool
    verify: bool = False
    peak_bytes: int = -1
    step_time: float = math.nan
    message: str = ""


TryBatch = Callable[[int, bool], Trial]


@dataclass
class SearchResult:
    """What the search found. batch_size is None when even the smallest size did not fit."""

    batch_size: int | None  # the answer: verified, margin applied where memory was the limit
    largest_ok: int | None  # the largest size that fitted in a probe
    smallest_oom: int | None  # the smallest size that did not fit (None: the data ran out first)
    limit: int  # the largest size the data allows
    margin: float
    trials: list[Trial] = field(default_factory=list)

    @property
    def limited_by(self) -> str:
        """ "memory" when some size did not fit, else "data" (every size up to the data's fitted)."""
        return "data" if self.smallest_oom is None else "memory"

    @property
    def failed_verifications(self) -> list[int]:
        """Sizes whose verification did not fit (each made the answer shrink by the margin again)."""
        return [t.batch_size for t in self.trials if t.verify and not t.ok]

    @property
    def verification(self) -> Trial | None:
        """The trial that verified the answer."""
        for trial in reversed(self.trials):
            if trial.verify and trial.ok and trial.batch_size == self.batch_size:
                return trial
        return None


def find_max_batch(
    try_batch: TryBatch,
    limit: int,
    start: int = DEFAULT_START,
    margin: float = DEFAULT_MARGIN,
    resolution: float = DEFAULT_RESOLUTION,
) -> SearchResult:
    """Search the largest batch size (1..limit) that fits; see the module docstring.

    try_batch(b, verify) must return a Trial; it is never asked for more than `limit` samples.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    result = SearchResult(None, None, None, limit, margin)

    def attempt(b: int, verify: bool = False) -> bool:
        trial = try_batch(b, verify)
        result.trials.append(trial)
        return trial.ok

    lo, hi = 0, None  # lo: the largest size that fitted (0: none yet); hi: the smallest that did not
    b = max(1, min(start, limit))
    while True:  # grow by powers of two
        if attempt(b):
            lo = b
            if b == limit:
                break
            b = min(2 * b, limit)
        else:
            hi = b
            break
    while hi is not None and hi - lo > max(1, math.floor(resolution * lo)):  # bisect
        mid = (lo + hi) // 2
        if attempt(mid):
            lo = mid
        else:
            hi = mid
    result.largest_ok, result.smallest_oom = (lo or None), hi
    # The margin applies where memory was the limit; at least 1 sample is left (a tiny limit has no room for it).
    candidate = lo if hi is None or lo < 1 else max(1, math.floor(lo * (1 - margin)))
    while candidate >= 1:  # verify; a failure shrinks the answer, never returns it
        if attempt(candidate, verify=True):
            result.batch_size = candidate
            break
        candidate = min(candidate - 1, math.floor(candidate * (1 - margin)))
    return result
