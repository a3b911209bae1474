"""Small typed claims: the numbers a generated sentence cites and the relation it states.

Every number-bearing fragment of the explanation (explain.py, startup.py), the recommendation
(advice.py) and a profile's prediction (predict.py) is worded from one of these, by `say(claim)`.
Each claim's `check()` raises ClaimError when the claim contradicts its own numbers ("cut" with a
ratio >= 1, a percentage that is not finite, "off the line" for a run inside the tolerance, a memory
slope explained as activations when it is negative or not resolved). The wording never checks, so a
report is never lost to a wrong sentence; tests collect every claim said (`collect()`) and check them
all (tests/core/test_claims.py). numpy-free, no TensorFlow, no Qt.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

MIB = 1 << 20


class ClaimError(ValueError):
    """A claim whose wording would contradict the numbers it cites."""


def _finite(name: str, *values: float) -> None:
    for value in values:
        if not (isinstance(value, (int, float)) and math.isfinite(value)):
            raise ClaimError(f"{name}: {value!r} is not a finite number")


def duration(seconds: float) -> str:
    """A duration in the unit that reads best: s, ms or µs, three significant digits."""
    if abs(seconds) >= 1:
        return f"{seconds:.3g} s"
    if abs(seconds) >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def mib(nbytes: float) -> str:
    """Bytes as MiB: whole MiB from 10 MiB up, else three significant digits."""
    return f"{nbytes / MIB:,.0f} MiB" if abs(nbytes) >= 10 * MIB else f"{nbytes / MIB:.3g} MiB"


@dataclass(frozen=True)
class Seconds:
    """A time (s), finite and not negative; `style` "short" is start-up's two-digit form (0.43 s, 2.1 s)."""

    value: float
    style: str = "auto"

    def check(self) -> None:
        _finite("seconds", self.value)
        if self.value < 0:
            raise ClaimError(f"seconds: {self.value} is negative")

    def text(self) -> str:
        if self.style == "short":
            return f"{self.value:.2g} s" if self.value < 1 else f"{self.value:.1f} s"
        return duration(self.value)


@dataclass(frozen=True)
class Share:
    """A fraction (0..1) of a stated base (the sentence names the base), worded as a whole percentage."""

    value: float
    base: str  # what it is a share of, e.g. "the steady epoch's time"

    def check(self) -> None:
        _finite(f"share of {self.base}", self.value)
        if not -1e-9 <= self.value <= 1 + 1e-9:
            raise ClaimError(f"share of {self.base}: {self.value} is outside 0..1")

    def text(self) -> str:
        return f"{self.value:.0%}"


@dataclass(frozen=True)
class LineFit:
    """How well a line fits its points: the median relative residual and R², over `sizes` distinct batch sizes."""

    median_rel_residual: float
    r2: float
    sizes: int
    digits: int = 0  # decimals of the percentage

    def check(self) -> None:
        if self.sizes < 2:
            raise ClaimError(f"line fit: {self.sizes} batch sizes cannot make a line")
        if self.sizes > 2:
            _finite("median residual", self.median_rel_residual)
            _finite("R²", self.r2)
            if self.median_rel_residual < 0:
                raise ClaimError(f"median residual {self.median_rel_residual} is negative")

    def text(self) -> str:
        if self.sizes == 2:
            return "through both points (two batch sizes: a line always fits two, so the fit is not tested)"
        if not (math.isfinite(self.median_rel_residual) and math.isfinite(self.r2)):  # check() fails it in tests
            return "fitted, its residual not defined"
        return f"within {self.median_rel_residual:.{self.digits}%} of the runs (median), R² = {self.r2:.2f}"


@dataclass(frozen=True)
class OffLine:
    """A run named off a fitted line: its measured value is more than `tolerance` (relative) from the line."""

    batch: int
    measured: float  # s
    fitted: float  # s
    tolerance: float  # relative, e.g. 0.25

    @property
    def deviation(self) -> float:
        """(measured - fitted) / fitted."""
        return (self.measured - self.fitted) / self.fitted

    def check(self) -> None:
        _finite("off the line", self.measured, self.fitted, self.tolerance)
        if self.fitted <= 0:
            raise ClaimError(f"batch {self.batch}: the line is {self.fitted} there, not a time")
        if abs(self.deviation) <= self.tolerance:
            raise ClaimError(
                f"batch {self.batch} is {self.deviation:+.1%} from the line, within the stated {self.tolerance:.0%}"
            )

    def text(self) -> str:
        return (
            f"batch {self.batch} ({duration(self.measured)} measured, {duration(self.fitted)} on the line, "
            f"{self.deviation:+.0%})"
        )


@dataclass(frozen=True)
class StepsRatio:
    """What doubling the batch did to the steps to target between two measured batch sizes: `value` =
    S(2B)/S(B) per doubling; `kind` "cut" (< 1), "rise" (> 1) or "same" (== 1 at two decimals)."""

    low: int
    high: int
    value: float
    kind: str

    @classmethod
    def of(cls, low: float, high: float, ratio_per_doubling: float) -> StepsRatio:
        """From regimes' per-doubling ratio S(B)/S(2B) (so the steps are multiplied by its inverse)."""
        value = 1 / ratio_per_doubling
        kind = "same" if f"{value:.2f}" == "1.00" else ("cut" if value < 1 else "rise")
        return cls(int(low), int(high), value, kind)

    def check(self) -> None:
        _finite("steps ratio", self.value)
        if self.value <= 0:
            raise ClaimError(f"steps ratio {self.value} is not positive")
        if self.kind == "cut" and not self.value < 1:
            raise ClaimError(f"'cut' with the steps multiplied by {self.value:.3g} (not below 1)")
        if self.kind == "rise" and not self.value > 1:
            raise ClaimError(f"'rose' with the steps multiplied by {self.value:.3g} (not above 1)")
        if self.kind not in ("cut", "rise", "same"):
            raise ClaimError(f"steps ratio kind {self.kind!r}")

    def text(self) -> str:
        where = f"between {self.low:,} and {self.high:,}"
        if self.kind == "cut":
            return f"doubling the batch cut the steps to {self.value:.2f}x {where}"
        if self.kind == "rise":
            return f"doubling the batch raised the steps {self.value:.2f}x {where}, more steps rather than fewer"
        return f"doubling the batch left the steps unchanged {where}"


@dataclass(frozen=True)
class MemorySlope:
    """m1 of peak(B) = m0 + m1 B (bytes per sample). `resolved`: positive and larger than the data's scatter
    (memory_fit.slope_resolved); only a resolved slope is explained as activations."""

    value: float
    resolved: bool

    def check(self) -> None:
        _finite("memory slope", self.value)
        if self.resolved and self.value <= 0:
            raise ClaimError(f"memory slope {self.value} is explained although it is not positive")

    def term(self) -> str:
        """The slope's term of peak(B) = m0 + m1 B, e.g. '0.135 MiB x B' (said only when resolved)."""
        return f"{mib(self.value)} x B"

    def text(self) -> str:
        if self.resolved:
            return f"m1 = {mib(self.value)} per sample (activations kept for the backward pass)"
        why = "negative" if self.value < 0 else "too small to tell from the runs' noise"
        return (
            f"m1 not resolved by these runs (the fitted {mib(self.value)} per sample is {why}: the memory does "
            "not measurably grow with the batch over these batch sizes)"
        )


@dataclass(frozen=True)
class PowersApart:
    """How many powers of two apart a prediction and a measurement are, and the verdict against one (the goal)."""

    value: float
    within_one: bool

    def check(self) -> None:
        _finite("powers of two apart", self.value)
        if self.value < 0 or self.within_one != (self.value <= 1):
            raise ClaimError(f"{self.value:.2f} powers of two apart said {'within' if self.within_one else 'not'}")

    def text(self) -> str:
        verdict = "within one, the goal" if self.within_one else "not within one, the goal"
        shown = f"{self.value:.1f}"
        if shown == "1.0" and self.value != 1.0:  # 1.016 read "1.0 ... (not within one)"
            shown = f"{self.value:.2f}"
        return f"{shown} powers of two apart ({verdict})"


@dataclass(frozen=True)
class Prediction:
    """A sentence that predicts (a critical batch, a best batch, T(B)): only said under a learning-rate policy
    whose assumption holds (lr_policy.LrPolicy.tuned: a rule or a per-batch search)."""

    what: str  # e.g. "best batch"
    value: float  # samples
    policy_tuned: bool

    def check(self) -> None:
        _finite(self.what, self.value)
        if not self.policy_tuned:
            raise ClaimError(f"{self.what} predicted for a sweep with one fixed learning rate")

    def text(self) -> str:
        return f"{self.value:,.0f}"


_collected: list | None = None


@contextmanager
def collect() -> Iterator[list]:
    """Every claim said inside the block, in order (for tests that check them)."""
    global _collected
    outer, _collected = _collected, []
    try:
        yield _collected
    finally:
        _collected = outer


def say(claim, form: str = "text") -> str:
    """The claim in words, by its method `form` (recorded while `collect()` is open)."""
    if _collected is not None:
        _collected.append(claim)
    return getattr(claim, form)()
