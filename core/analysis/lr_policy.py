"""Does a critical-batch prediction apply to this sweep? Its learning-rate policy decides.

McCandlish et al. (2018) model the steps to a target as S(B) = Smin (1 + Bcrit/B) for a learning
rate tuned for each batch size, and Shallue et al. (2018) measured the same shape only with the
rate re-tuned per batch. With ONE fixed rate for every batch size (rule constant and no lr-find file,
the optimizer's default rate included) large batches are held back by the rate, not the batch, so
the noise-scale prediction (Bcrit ~ B_simple), a profile's best batch and the minimum of the fitted
T(B) = S(B) t_step(B) do not apply. A rule (linear, sqrt: core/lr_rules.py) or a per-batch search
(--lr-from an lr-find file) scales the rate with the batch: the prediction is made, its assumption named.
Every place that predicts (analyse.py, advice.py, predict.py, noise_scale.py) asks `lr_policy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

FIXED, RULE, SEARCH, UNKNOWN = "fixed", "rule", "search", "unknown"
ASSUMPTION = "it assumes a learning rate tuned for each batch size (McCandlish et al. 2018; Shallue et al. 2018)"


@dataclass(frozen=True)
class LrPolicy:
    """How a sweep set each batch size's learning rate: FIXED (one rate for all), RULE (lr_rule linear or sqrt),
    SEARCH (each batch's rate from an lr-find file) or UNKNOWN (a file that does not say)."""

    kind: str
    rule: str = "constant"
    lr: float = math.nan  # the fixed rate (NaN: the optimizer's own default)
    lr_from: str = ""  # the lr-find file of a search
    preset: str = ""

    @property
    def tuned(self) -> bool:
        """Whether the prediction's assumption (a rate chosen per batch size) can hold: a rule or a search; a file
        that does not record its policy is given the benefit of the doubt, and says so (`assumption`)."""
        return self.kind != FIXED

    def how(self) -> str:
        """The policy in words, e.g. 'every batch size trained at one rate, 0.01 (--lr-rule constant)'."""
        if self.kind == SEARCH:
            return f"each batch size trained at the rate its own learning-rate range test chose ({self.lr_from})"
        if self.kind == RULE:
            return f"the rate scaled with the batch by the {self.rule} rule (--lr-rule {self.rule})"
        if self.kind == FIXED:
            rate = f"one rate, {self.lr:g}" if math.isfinite(self.lr) else "one rate, the optimizer's own default"
            return f"every batch size trained at {rate} (--lr-rule constant, no --lr-from)"
        return "the run file does not record how the rate was chosen per batch size"

    def assumption(self) -> str:
        """The clause a prediction carries: its assumption and whether this sweep meets it."""
        if self.kind == UNKNOWN:
            return f"{ASSUMPTION}, which this file cannot confirm"
        if self.kind == FIXED:
            return f"{ASSUMPTION}; here {self.how()}, so the prediction does not apply to this sweep"
        return f"{ASSUMPTION}; here {self.how()}"

    def instead(self) -> str:
        """What to run so that the prediction applies, in the command line's words."""
        preset = self.preset or "P"
        return (
            f"for a prediction that applies, choose the rate per batch size: `batchlab lr-find --preset {preset}` "
            f"then `batchlab sweep --preset {preset} --lr-from FILE`, or scale it by a rule: "
            "`--lr-rule linear` or `--lr-rule sqrt`"
        )

    def refusal(self, what: str, subject: str = "this sweep") -> str:
        """One sentence: `what` (e.g. 'The predicted best batch') is not given for `subject`, why, and what to
        run instead."""
        return f"{what}: not given for {subject}, because {ASSUMPTION} and {self.how()}; {self.instead()}."


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def lr_policy(spec: dict, run_attrs: list[dict] | None = None) -> LrPolicy:
    """The policy of a sweep from its spec (lr_rule, lr_from, lr, preset); without lr_rule in the spec (older
    or hand-made files), from the runs' attributes (lr_rule and the rate each run used)."""
    spec = spec or {}
    preset = str(spec.get("preset") or "")
    if spec.get("lr_from"):
        return LrPolicy(SEARCH, lr_from=str(spec["lr_from"]), preset=preset)
    rule = spec.get("lr_rule")
    if rule is not None:
        rule = str(rule)
        if rule != "constant":
            return LrPolicy(RULE, rule=rule, preset=preset)
        return LrPolicy(FIXED, lr=_float(spec.get("lr")), preset=preset)
    attrs = [a for a in (run_attrs or []) if a.get("lr_rule") is not None]
    if not attrs:
        return LrPolicy(UNKNOWN, preset=preset)
    rules = {str(a["lr_rule"]) for a in attrs}
    if rules != {"constant"}:
        return LrPolicy(RULE, rule=sorted(rules - {"constant"})[0], preset=preset)
    rates = {f"{_float(a.get('lr0', a.get('lr'))):.12g}" for a in attrs}  # text: NaN (default rate) equals NaN
    if len(rates) > 1:  # constant rule but a rate per batch size: a search whose file is not named
        return LrPolicy(SEARCH, lr_from="rates per batch size recorded in the runs", preset=preset)
    return LrPolicy(FIXED, lr=float(rates.pop()), preset=preset)


def sweep_lr_policy(sweep) -> LrPolicy:
    """The policy of a core.model.SweepData (live or from a file)."""
    return lr_policy(sweep.spec, [r.attrs for r in sweep.ordered_runs()])
