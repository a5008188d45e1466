"""Will a setting certify anything? The certification planner, exact (docs/architecture.md, section 3).

Before any sampling, the numbers below say whether a setting *can* certify a component in or out, how
likely it is to, and what to change when it cannot. Everything is computed exactly from the binomial
distribution and the multiple-testing level, never by simulation. For ``|D|`` examples, ``U`` tested
components and a :class:`~certified_circuits.core.setting.Setting` (paper Sec. 3, Algorithm 1, App. C.2):

- ``q = p_del^|D|`` (:attr:`Plan.p_empty`) is the chance that a sub-dataset is empty. ``A(empty)`` is
  the empty circuit, an OUT vote for every component, so a component's in-probability is at most
  ``1 - q``.
- ``k*`` (:attr:`Plan.critical_count`) is the smallest agreeing count with
  ``P[Bin(n, tau) >= k*] <= alpha / U``: the Bonferroni level, and the first step of Holm's. It is
  computed with the decision rule's own p-value (:func:`~certified_circuits.core.certification.binomial_pvalue`),
  so the planner and the test can never disagree. A component is certifiable only when ``k* <= n``,
  i.e. ``n >= min_samples``, the smallest ``n`` with ``tau^n <= alpha / U``; equivalently
  ``tau <= max_tau = (alpha / U)^(1/n)``.
- IN needs ``1 - q > tau``. Its best case (a component in the circuit of every non-empty
  sub-dataset) is certified with probability
  ``power_in = P[Bin(n0, 1 - q) > n0/2] * P[Bin(n, 1 - q) >= k*]``: the selection votes must guess
  *in* and the certification votes must reach ``k*``; the two mask streams are independent, so the
  product is exact. OUT's best case (out on every sub-dataset) always guesses *out* and agrees ``n``
  times: ``power_out`` is 1 when ``k* <= n`` and 0 otherwise.
- With Holm the same numbers hold for unanimous components (every p-value then equals ``tau^n``);
  Holm never rejects fewer than Bonferroni, so for other vote patterns the powers are lower bounds.

A plan is *vacuous* when neither side can be certified, and *marginal* when one side is impossible,
when ``p_empty > P_EMPTY_WARNING`` or when ``power_in < POWER_WARNING``. :func:`check_plan` raises on a
vacuous plan and warns on a marginal one; the public API, the CLI and the workflow call it before any
sampling.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from certified_circuits.core.certification import binomial_pvalue, binomial_tail, radius_of, samples_for
from certified_circuits.core.setting import Setting, number
from certified_circuits.core.validation import check_count

#: above this chance of an empty sub-dataset a plan is marginal: more than 1 sub-dataset in 20 votes OUT for
#: every component, which caps every in-probability at 0.95 (the paper's vision tau) and drains IN's power.
P_EMPTY_WARNING = 0.05

#: below this best-case IN power a plan is marginal: a component in the circuit on every non-empty
#: sub-dataset is certified IN less often than not.
POWER_WARNING = 0.5

#: the power that :meth:`Plan.suggest` asks of IN for each setting it lists
SUGGEST_POWER = 0.9

#: deletion probabilities that :meth:`Plan.suggest` tries (the paper uses 0.6, 0.85, 0.95 and 0.99)
SUGGEST_P_DEL = tuple(round(0.5 + 0.01 * i, 2) for i in range(50))

#: the largest ``n`` a setting may have: config.schema.yaml's ``samples`` maximum (the votes stage holds
#: ``(n0 + n) x (|D| + |U|)`` float64 values). No fix or suggestion proposes more.
MAX_SAMPLES = 100_000

#: the largest ``n`` that :meth:`Plan.suggest` proposes
SUGGEST_MAX_N = MAX_SAMPLES


class VacuousSettingError(ValueError):
    """A setting that can certify no component, in or out: every result would be an abstention."""


class PlanWarning(UserWarning):
    """A marginal setting: one side cannot be certified, or sub-datasets are often empty."""


def in_impossible_from(tau: float, n_examples: int) -> float:
    """The deletion probability from which no component can be certified IN at ``|D| = n_examples``.

    A component is in at most ``1 - p_empty = 1 - p_del^|D|`` of the circuits (an empty sub-dataset gives the
    empty circuit), so IN needs ``p_del^|D| < 1 - tau``, i.e. ``p_del < (1 - tau)^(1/|D|)`` (docs/architecture.md section 6;
    :attr:`Plan.can_certify_in` is False from here on, whatever n).

    Returns:
        ``(1 - tau)^(1 / n_examples)``.
    """
    return (1.0 - tau) ** (1.0 / n_examples)


def critical_counts(n: np.ndarray | int, tau: float, level: float) -> np.ndarray:
    """``k*(n)``: the smallest agreeing count with ``P[Bin(n, tau) >= k*] <= level``, per ``n``.

    Vectorized bisection on the decision rule's p-value (monotone non-increasing in the count); ``n + 1``
    where no count of ``n`` samples reaches the level.

    Args:
        n: sample counts (int, any shape).
        tau: the null's agreement probability.
        level: the per-component level (``alpha / U``).

    Returns:
        int64 array of ``n``'s shape.
    """
    n = np.asarray(n, dtype=np.int64)
    low = np.zeros_like(n)  # p-value(low) > level (p-value(0) = 1)
    high = n + 1  # "not reachable" sentinel; p-value(n) <= level is checked by the bisection
    while np.any(high - low > 1):
        mid = (low + high) // 2
        ok = binomial_pvalue(mid, n, tau) <= level
        high = np.where(ok & (high - low > 1), mid, high)
        low = np.where(~ok & (high - low > 1), mid, low)
    return high


@dataclass(frozen=True)
class Suggestion:
    """One setting that reaches a radius with both sides certifiable (:meth:`Plan.suggest`).

    Attributes:
        p_del, tau, n: the setting's deletion probability, threshold and certification samples.
        radius: its certified radius (at least the one asked for).
        p_empty: ``p_del^|D|``.
        power_in: best-case IN power at this ``n`` (at least the power asked for).
    """

    p_del: float
    tau: float
    n: int
    radius: int
    p_empty: float
    power_in: float

    def __str__(self) -> str:
        return (
            f"p_del {number(self.p_del)}, tau {number(self.tau)}, n {self.n}: radius {self.radius}, "
            f"p_empty {self.p_empty:.3g}, IN power {self.power_in:.3f}"
        )


@dataclass(frozen=True)
class Plan:
    """What a setting can certify for ``n_examples`` examples and ``n_components`` tested components.

    Build one with :func:`plan`. Every number is exact (module docstring; paper App. C.2).

    Attributes:
        n_examples: ``|D|``.
        n_components: ``U``, the components corrected for (per K).
        setting: the :class:`~certified_circuits.core.setting.Setting`.
        radius: ``floor(log(1.5 - tau) / log p_del)`` (Theorem 1).
        p_empty: ``p_del^|D|``, the chance that a sub-dataset is empty (its circuit is empty).
        level: ``alpha / U``, the per-component level (Bonferroni; Holm's first step).
        critical_count: ``k*``, the smallest agreeing count of ``n`` that certifies; ``n + 1`` when none does.
        min_samples: the smallest ``n`` that certifies a unanimous component at this tau, alpha and U.
        max_tau: ``(alpha / U)^(1/n)``, the largest tau this ``n`` can certify.
        can_certify_in: ``n >= min_samples`` and ``1 - p_empty > tau``.
        can_certify_out: ``n >= min_samples``.
        power_in: P(certified IN) for a component in every non-empty sub-dataset's circuit.
        power_out: P(certified OUT) for a component out of every circuit (0 or 1).
    """

    n_examples: int
    n_components: int
    setting: Setting
    radius: int
    p_empty: float
    level: float
    critical_count: int
    min_samples: int
    max_tau: float
    can_certify_in: bool
    can_certify_out: bool
    power_in: float
    power_out: float
    warnings: tuple[str, ...] = field(default=())

    @property
    def vacuous(self) -> bool:
        """Neither side can be certified: every component would abstain."""
        return not (self.can_certify_in or self.can_certify_out)

    @property
    def marginal(self) -> bool:
        """Something can be certified, but the plan carries a warning (one side impossible, or empty
        sub-datasets frequent, or IN's best-case power below :data:`POWER_WARNING`)."""
        return not self.vacuous and bool(self.warnings)

    @property
    def verdict(self) -> str:
        """``"vacuous"``, ``"marginal"`` or ``"ok"``."""
        return "vacuous" if self.vacuous else "marginal" if self.warnings else "ok"

    def record(self) -> dict[str, str]:
        """What a certificate file records of its plan (read back by the reports' flags and ``inspect``):
        ``plan_verdict`` (:attr:`verdict`) and ``plan_warnings`` (:meth:`problems`, one per line)."""
        return {"plan_verdict": self.verdict, "plan_warnings": "\n".join(self.problems())}

    def problems(self) -> list[str]:
        """One sentence per problem, each with its numbers and its fix ([] for an ``ok`` plan).

        Every value a fix proposes lies in its domain (``0 < p_del < 1``, ``0.5 < tau < 1``,
        ``1 <= n <= MAX_SAMPLES``); where no value of one parameter works, the fix says so and names what does.
        Settings are printed exactly (:func:`~certified_circuits.core.setting.number`): tau 0.9999999 is not "1".
        """
        s = self.setting
        tau, p_del = number(s.tau), number(s.p_del)
        out: list[str] = []
        if self.n < self.min_samples:
            out.append(
                f"nothing can be certified: n = {s.n} is below min_samples = {self.min_samples} (tau {tau}, alpha "
                f"{number(s.alpha)}, U = {self.n_components:,}); with n = {s.n} tau must be <= max_tau = "
                f"{_shown_below(self.max_tau)}. Fix: {self._samples_fix()}."
            )
        if self.radius == 0:
            out.append(
                f"radius 0: at tau {tau} and p_del {p_del} a certificate survives no edit of the dataset "
                f"(p_del^1 < 1.5 - tau). Fix: {self._radius_fix()}."
            )
        if 1.0 - self.p_empty <= s.tau:
            out.append(
                f"IN cannot be certified: p_empty = p_del^|D| = {p_del}^{self.n_examples} = {self.p_empty:.3g}, "
                f"so no component is in more than {1 - self.p_empty:.1%} of the circuits, <= tau {tau}. "
                f"Fix: {self._in_fix()}."
            )
        elif self.p_empty > P_EMPTY_WARNING:
            out.append(
                f"p_empty = {p_del}^{self.n_examples} = {self.p_empty:.3g} > {P_EMPTY_WARNING:g}: one sub-dataset "
                f"in {1 / self.p_empty:.0f} is empty and votes OUT for everything. Fix: {self._in_fix()}."
            )
        if self.can_certify_in and self.power_in < POWER_WARNING:
            out.append(
                f"IN has low power: a component in every non-empty circuit is certified with probability "
                f"{self.power_in:.3f} (needs {self.critical_count} of {s.n} agreeing votes, expects "
                f"{s.n * (1 - self.p_empty):.0f}). Fix: raise n, lower tau or p_del, or use more examples."
            )
        return out

    def _samples_fix(self) -> str:
        """How to make a unanimous component pass: raise n (at most :data:`MAX_SAMPLES`) or lower tau (above 0.5),
        or both; where neither works, what does (fewer components, a larger alpha)."""
        s = self.setting
        fixes = []
        if self.min_samples <= MAX_SAMPLES:
            fixes.append(f"raise n to >= {self.min_samples}")
        lowest = _floor_to_grid(self.max_tau)
        if lowest is not None and lowest > 0.5:
            fixes.append(f"lower tau to <= {number(lowest)}")
        if fixes:
            return ", or ".join(fixes)
        at_most = _floor_to_grid(_max_tau(s.alpha / self.n_components, MAX_SAMPLES))
        both = (
            f"raise n to >= {MAX_SAMPLES} and lower tau to <= {number(at_most)}, or "
            if at_most is not None and at_most > 0.5
            else ""
        )
        return (
            f"no n up to {MAX_SAMPLES:,} (the largest the votes stage takes) reaches tau {number(s.tau)}, and at "
            f"n = {s.n} no tau above 0.5 passes: {both}test fewer components (U) or raise alpha"
        )

    def _radius_fix(self) -> str:
        """Radius 1 by one change: the smallest p_del (< 1) at this tau, or the smallest tau (< 1) at this p_del."""
        s = self.setting
        fixes = []
        p_del = _smallest_p_del(s.tau, 1)
        if p_del is not None:
            fixes.append(f"raise p_del to >= {number(p_del)}")
        tau = _smallest_tau(s.p_del, 1, finest=12)
        if tau is not None:
            fixes.append(f"raise tau to >= {number(tau)}")
        if fixes:
            return " or ".join(fixes)
        return (
            f"no p_del below 1 gives radius 1 at tau {number(s.tau)} (radius 1 needs 1.5 - tau <= p_del), and no "
            f"tau below 1 gives it at p_del {number(s.p_del)}: change both, e.g. raise p_del to >= 0.6 and tau to "
            f">= {number(_smallest_tau(0.6, 1) or 0.9)}"
        )

    @property
    def n(self) -> int:
        return self.setting.n

    def _in_fix(self) -> str:
        """More examples, a lower p_del (each to ``p_empty < min(1 - tau, P_EMPTY_WARNING)``) or, when IN is
        impossible, a lower tau (below ``1 - p_empty``, above 0.5) where one exists."""
        s = self.setting
        # p_del^|D| < target  <=>  |D| > log(target) / log(p_del)  <=>  p_del < target^(1/|D|)
        target = min(1.0 - s.tau, P_EMPTY_WARNING)
        need_examples = math.floor(math.log(target) / math.log(s.p_del)) + 1
        max_p_del = target ** (1.0 / self.n_examples)
        below = _floor_to_grid(max_p_del, strictly_below=True)
        lower = ""
        if below is not None:
            radius = radius_of(s.tau, below)  # the setting's tau; below is in (0, max_p_del), max_p_del < 1
            lower = (
                f", or lower p_del to <= {number(below)} "
                f"(radius {radius} at tau {number(s.tau)}{': no edit is certified' if radius == 0 else ''})"
            )
        tau = ""
        if 1.0 - self.p_empty <= s.tau:  # IN impossible: a tau below 1 - p_empty (and above 0.5) makes it possible
            below_in = _floor_to_grid(1.0 - self.p_empty, strictly_below=True)
            tau = (
                f", or lower tau to <= {number(below_in)}"
                if below_in is not None and below_in > 0.5
                else f"; no tau above 0.5 makes IN possible at p_del {number(s.p_del)} and |D| = {self.n_examples}"
            )
        return f"use at least {need_examples} examples at p_del {number(s.p_del)}{lower}{tau}"

    def suggest(self, radius: int | None = None, *, power: float = SUGGEST_POWER, limit: int = 5) -> list[Suggestion]:
        """Settings ``(p_del, tau, n)`` that reach ``radius`` with both IN and OUT certifiable at this ``|D|``, ``U``.

        For each ``p_del`` of :data:`SUGGEST_P_DEL`, tau is the smallest multiple of 0.001 in [0.5, 1) with
        ``certified_radius(tau, p_del) >= radius`` (``tau >= 1.5 - p_del^r``); the setting needs
        ``1 - p_del^|D| > tau`` (IN possible) and ``p_del^|D| < P_EMPTY_WARNING``, and ``n`` is the smallest
        with best-case IN power >= ``power``
        (hence ``n >= min_samples``), at most :data:`SUGGEST_MAX_N`. ``n0``, ``alpha`` and the correction
        are this plan's.

        Args:
            radius: the radius to reach (default: this plan's, at least 1: radius 0 certifies no edit).
            power: the best-case IN power each suggestion must reach.
            limit: how many to return (the smallest ``n`` first, then the smallest ``p_del``).

        Returns:
            Up to ``limit`` suggestions; [] when no ``p_del`` of the grid reaches ``radius`` with IN possible
            at this ``|D|`` (:meth:`examples_needed` then says how many examples would).
        """
        radius = max(self.radius, 1) if radius is None else check_count("radius", radius, minimum=0)
        found: list[Suggestion] = []
        for p_del in SUGGEST_P_DEL:
            tau = _smallest_tau(p_del, radius)
            if tau is None or p_del**self.n_examples >= min(1.0 - tau, P_EMPTY_WARNING):
                continue
            setting = self.setting.replace(p_del=p_del, tau=tau)
            n = _smallest_n_for_power(self.n_examples, self.n_components, setting, power)
            if n is None:
                continue
            candidate = plan(self.n_examples, self.n_components, setting.replace(n=n))
            found.append(Suggestion(p_del, tau, n, candidate.radius, candidate.p_empty, candidate.power_in))
        found.sort(key=lambda s: (s.n, s.p_del))
        return found[:limit]

    def examples_needed(self, radius: int | None = None) -> int | None:
        """The smallest ``|D|`` at which some ``p_del`` of the grid reaches ``radius`` with IN possible and
        ``p_empty`` below :data:`P_EMPTY_WARNING` (``p_del^|D| < min(1 - tau, P_EMPTY_WARNING)`` at the smallest
        tau of that radius); None when no ``p_del`` of the grid reaches it at all."""
        radius = self.radius if radius is None else radius
        best: int | None = None
        for p_del in SUGGEST_P_DEL:
            tau = _smallest_tau(p_del, radius)
            if tau is None:
                continue
            # 1 - p_del^N > tau and p_del^N < P_EMPTY_WARNING  <=>  N > log(min(1 - tau, P_EMPTY_WARNING)) / log(p_del)
            need = math.floor(math.log(min(1.0 - tau, P_EMPTY_WARNING)) / math.log(p_del)) + 1
            best = need if best is None else min(best, need)
        return best

    def largest_radius(self) -> int:
        """The largest radius that some ``p_del`` of the grid reaches with IN possible at this ``|D|``
        (0 when even radius 1 needs more examples)."""
        radius = 0
        while True:
            need = self.examples_needed(radius + 1)
            if need is None or need > self.n_examples:
                return radius
            radius += 1

    def __str__(self) -> str:
        s = self.setting
        lines = [
            f"Certification plan: |D| = {self.n_examples:,} examples, U = {self.n_components:,} components",
            f"  setting: p_del {number(s.p_del)}, n0 {s.n0}, n {s.n}, tau {number(s.tau)}, alpha {number(s.alpha)}, "
            f"{s.correction} "
            f"-> radius {self.radius}",
            f"  p_empty = p_del^|D| = {self.p_empty:.3g}: a component is in at most {1 - self.p_empty:.1%} of the circuits",
            f"  min_samples = {self.min_samples} (n {'>=' if s.n >= self.min_samples else '<'} it); "
            f"max_tau at n = {s.n}: {_shown_below(self.max_tau, 5)}; level alpha/U = {self.level:.3g}",
            "  k* = "
            + (
                f"{self.critical_count} of {s.n} agreeing votes certify"
                if self.critical_count <= s.n
                else f"none: no count of {s.n} votes reaches the level"
            ),
            f"  IN:  {'possible' if self.can_certify_in else 'impossible'}, best-case power {self.power_in:.3f}",
            f"  OUT: {'possible' if self.can_certify_out else 'impossible'}, best-case power {self.power_out:.3f}",
            f"  verdict: {self.verdict}",
        ]
        lines += [f"  - {problem}" for problem in self.problems()]
        if self.verdict != "ok":
            suggestions = self.suggest()
            if suggestions:
                lines.append(
                    f"  settings that reach radius {max(self.radius, 1)} with IN and OUT (IN power >= {SUGGEST_POWER:g}):"
                )
                lines += [f"    {suggestion}" for suggestion in suggestions]
            else:
                need = self.examples_needed()
                lines.append(
                    f"  no setting reaches radius {self.radius} with IN possible at |D| = {self.n_examples}"
                    + (f": it needs at least {need} examples" if need else "")
                )
                reachable = self.largest_radius()
                if reachable:
                    lines.append(f"  the largest radius with IN and OUT at |D| = {self.n_examples} is {reachable}:")
                    lines += [f"    {suggestion}" for suggestion in self.suggest(reachable)]
        return "\n".join(lines)


def _floor_to_grid(value: float, *, strictly_below: bool = False) -> float | None:
    """``value`` rounded down to the first decimal grid (0.001, then 0.0001, ... down to 1e-12) that keeps it
    positive (and, with ``strictly_below``, below ``value``): a bound a fix can print. None when none does."""
    for digits in range(3, 13):
        scale = 10**digits
        count = math.floor(value * scale)
        if strictly_below and count / scale >= value:
            count -= 1
        shown = round(count / scale, digits)
        if shown > 0.0 and (shown < value if strictly_below else shown <= value):
            return shown
    return None


def _shown_below(value: float, digits: int = 4) -> str:
    """A computed upper bound in [0, 1) (max_tau) printed rounded down, so that the printed bound still holds and
    is never "1": ``digits`` decimals, more where fewer would show 0."""
    for places in range(digits, 13):
        shown = math.floor(value * 10**places) / 10**places
        if shown > 0.0:
            return f"{shown:.{places}f}"
    return f"{value:.3g}"


def _max_tau(level: float, n: int) -> float:
    """``level^(1/n)``: the largest tau at which ``n`` unanimous votes pass the per-component level."""
    return float(level ** (1.0 / n))


def _smallest_on_grid(exact: float, ok: Any, finest: int) -> float | None:
    """The smallest multiple of 0.001 (then 0.0001, ... 10^-finest) in (0, 1) at or above ``exact`` for which
    ``ok(value)`` holds, the coarsest grid first; None when every such value rounds to 1."""
    for digits in range(3, finest + 1):
        scale = 10**digits
        for step in range(3):  # guard the float boundary
            value = round((math.ceil(exact * scale - 1e-9) + step) / scale, digits)
            if 0.0 < value < 1.0 and ok(value):
                return value
    return None


def _smallest_p_del(tau: float, radius: int, finest: int = 12) -> float | None:
    """The smallest p_del below 1 on a decimal grid with ``certified_radius(tau, p_del) >= radius``
    (``p_del^radius >= 1.5 - tau``), or None when only ``p_del = 1`` would."""
    return _smallest_on_grid(
        (1.5 - tau) ** (1.0 / radius), lambda p_del: radius_of(tau, p_del) >= radius, finest
    )  # a valid tau (a Setting's); the grid's p_del lie in (0, 1)


def _smallest_tau(p_del: float, radius: int, finest: int = 3) -> float | None:
    """The smallest tau in (0.5, 1) on a decimal grid (multiples of 0.001 by default) with
    ``certified_radius(tau, p_del) >= radius`` (``tau >= 1.5 - p_del^radius``), or None."""
    exact = max(0.5, 1.5 - p_del**radius)
    # the grid's tau lie in (0.5, 1), p_del is a Setting's (or 0.6): both valid, not checked again
    return _smallest_on_grid(exact, lambda tau: tau > 0.5 and radius_of(tau, p_del) >= radius, finest)


def _smallest_n_for_power(n_examples: int, n_components: int, setting: Setting, power: float) -> int | None:
    """The smallest ``n <= SUGGEST_MAX_N`` with best-case IN power >= ``power`` (vectorized scan), or None."""
    in_rate = 1.0 - setting.p_del**n_examples
    start = samples_for(setting.tau, setting.alpha, n_components)
    select = float(binomial_tail(setting.n0 // 2 + 1, setting.n0, in_rate))
    if select < power:
        return None
    width = 512
    while start <= SUGGEST_MAX_N:
        n = np.arange(start, min(start + width, SUGGEST_MAX_N + 1))
        k = critical_counts(n, setting.tau, setting.alpha / n_components)
        reached = np.nonzero(select * binomial_tail(k, n, in_rate) >= power)[0]
        if reached.size:
            return int(n[reached[0]])
        start, width = int(n[-1]) + 1, width * 2
    return None


def plan(n_examples: int, n_components: int, setting: Setting | None = None) -> Plan:
    """The exact certification plan of ``setting`` for ``|D|`` examples and ``U`` tested components.

    Args:
        n_examples: ``|D|``, the size of the concept dataset (>= 1).
        n_components: ``U``, the number of components the correction counts (>= 1; per K of a grid).
        setting: the setting (default ``Setting()``: the paper's vision setting).

    Returns:
        The :class:`Plan`; ``str(plan)`` is a short report for people.

    Example:
        >>> import certified_circuits as cc
        >>> p = cc.plan(100, 32491, cc.Setting(p_del=0.99, tau=0.9))
        >>> p.can_certify_in, p.can_certify_out, round(p.p_empty, 3)
        (False, True, 0.366)
    """
    setting = Setting() if setting is None else setting
    if not isinstance(setting, Setting):
        raise TypeError(f"setting must be a certified_circuits.Setting, got {type(setting).__name__}")
    n_examples = check_count("n_examples", n_examples, minimum=1)
    n_components = check_count("n_components", n_components, minimum=1)
    p_del = setting.p_del  # a Setting is validated when it is built: its fields are not checked again
    level = setting.alpha / n_components
    p_empty = p_del**n_examples
    in_rate = 1.0 - p_empty
    k_star = int(critical_counts(setting.n, setting.tau, level))
    # min_samples by the decision rule's own p-value: the smallest n whose unanimous count certifies
    n_min = samples_for(setting.tau, setting.alpha, n_components)
    while n_min > 1 and float(binomial_pvalue(n_min - 1, n_min - 1, setting.tau)) <= level:
        n_min -= 1
    while float(binomial_pvalue(n_min, n_min, setting.tau)) > level:
        n_min += 1
    reachable = k_star <= setting.n
    can_in = reachable and in_rate > setting.tau
    power_in = 0.0
    if can_in:
        select_in = float(binomial_tail(setting.n0 // 2 + 1, setting.n0, in_rate))  # c0 > n0/2 guesses in
        power_in = select_in * float(binomial_tail(k_star, setting.n, in_rate))
    partial = Plan(
        n_examples=n_examples,
        n_components=n_components,
        setting=setting,
        radius=radius_of(setting.tau, p_del),
        p_empty=float(p_empty),
        level=float(level),
        critical_count=k_star,
        min_samples=int(n_min),
        max_tau=_max_tau(level, setting.n),
        can_certify_in=bool(can_in),
        can_certify_out=bool(reachable),
        power_in=power_in,
        power_out=1.0 if reachable else 0.0,
    )
    return Plan(**{**partial.__dict__, "warnings": tuple(partial.problems())})


def check_plan(the_plan: Plan, *, allow_vacuous: bool = False, stacklevel: int = 3) -> Plan:
    """Refuse a vacuous plan and warn about a marginal one, before any sampling.

    Args:
        the_plan: the plan of the run about to start.
        allow_vacuous: do not raise on a vacuous plan (it still warns).
        stacklevel: passed to :func:`warnings.warn` (the caller of the API function by default).

    Returns:
        The plan.

    Raises:
        VacuousSettingError: (a ``ValueError``) when neither side can be certified, with ``min_samples``,
            ``max_tau``, ``p_empty`` and the fix in the message.
    """
    if the_plan.vacuous and not allow_vacuous:
        raise VacuousSettingError(
            "this setting can certify nothing: every component would abstain.\n"
            + str(the_plan)
            + "\n(pass allow_vacuous=True to run it anyway)"
        )
    for problem in the_plan.problems():
        warnings.warn(PlanWarning(problem), stacklevel=stacklevel)
    return the_plan
