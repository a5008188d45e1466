"""The certification setting: the parameters of Algorithms 1 and 2, and their canonical names.

A :class:`Setting` is the votes' ``(p_del, n0, n, seed)`` (Algorithm 2, ``Sample``) and the test's
``(tau, alpha, correction)`` (Algorithm 1, ``CertifyCircuit``). Its tags name it exactly, in tables and
in result paths (:mod:`certified_circuits.pipeline.layout` builds paths from them):
``p{p_del}_n0{n0}_n{n}_s{seed}/t{tau}_a{alpha}_{correction}``.

Numbers appear *exactly*: a float is written as Python's shortest round-trip ``repr`` (``0.95``,
``0.001``, ``1e-05``, ``0.6000001``), so ``float(tag) == value`` always; a 6-digit ``%g`` would turn
``tau: 0.9999999`` into ``1`` and ``p_del: 0.6000001`` into ``0.6``. Each tag has one exact inverse:
:meth:`Setting.from_tag`, :func:`parse_votes_tag` and :func:`parse_decision_tag` (one reader, :func:`parse_tag`); a
stage's ``--setting TAG`` is read through them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping


def number(value: float | int) -> str:
    """A number as it appears in a path and in every message: exact (``repr`` of the float, ``str`` of an int).

    The one way a setting's value (tau, p_del, alpha) is printed (paths, plans, warnings, logs, commands), so
    that two settings never print alike: ``number(0.9999999) == "0.9999999"`` where ``f"{0.9999999:g}"`` is ``1``.

    Args:
        value: a finite float or an int (not a bool).

    Returns:
        The shortest text that reads back as ``value`` (``"0.95"``, ``"1e-05"``, ``"5"`` for 5.0).
    """
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is not a number")
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{value!r} cannot appear in a result path (must be finite)")
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


class SettingTypeError(TypeError, ValueError):
    """A :class:`Setting` field of the wrong type (a ValueError too, like every other invalid setting)."""


def _typed(name: str, value: Any, kind: type) -> float | int:
    """``value`` as a plain Python ``kind``: an int field takes Python or numpy integers, a float field also
    Python or numpy floats; bools, strings and anything else are refused with the fix."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral if kind is int else numbers.Real):
        expected = "an integer (int or numpy integer)" if kind is int else "a number (int, float or numpy number)"
        hint = f"; write {name}={value}" if isinstance(value, str) and _parses(value, kind) else ""
        raise SettingTypeError(f"{name}={value!r} is invalid: expected {expected}, got {type(value).__name__}{hint}")
    return kind(value)


def _parses(text: str, kind: type) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Setting:
    """One certification setting: the votes' (p_del, n0, n, seed) and the test's (tau, alpha, correction).

    ``from_config`` takes a config ``certification`` block (any extra keys are ignored).

    Every field has a default: ``Setting()`` is the paper's vision setting (Sec. 5.1 and App. D: ResNet and
    ViT on ImageNet, ``|D| = 50``). Change what your data needs, and check it with
    :func:`certified_circuits.plan` before running.

    Attributes:
        p_del: deletion probability of RS-Del, in (0, 1). Default 0.6, the paper's vision choice (radius 1
            at tau 0.95); its language settings use 0.85 to 0.99 (App. Table 2).
        n0: number of selection sub-datasets (the guess of Algorithm 1), >= 1. Default 100 (the paper's).
        n: number of certification sub-datasets (the binomial test), >= 1. Default 1000 (the paper's; it
            certifies tau up to 0.985 over 3,840 ResNet channels, App. C.2).
        seed: the seed of both mask streams, an integer in [0, 2**63). Default 0.
        tau: confidence threshold, in [0.5, 1); with p_del it fixes the radius (Theorem 1). Default 0.95
            (the paper's vision tau).
        alpha: family-wise failure probability, in (0, 1). Default 0.001 (the paper's).
        correction: ``"bonferroni"`` (paper, default) or ``"holm"``.

    Raises:
        ValueError: on construction, for any value outside these ranges (the message names it); a value of
            the wrong type (the string ``"0.9"``, a bool) raises :class:`SettingTypeError`, a ValueError and
            a TypeError. numpy integers and floats are accepted and stored as Python ``int`` and ``float``.
    """

    p_del: float = 0.6
    n0: int = 100
    n: int = 1000
    seed: int = 0
    tau: float = 0.95
    alpha: float = 0.001
    correction: str = "bonferroni"

    def __post_init__(self) -> None:
        # types first: a string "0.9" or a bool would pass (or break) the range checks below
        for name, kind in (("p_del", float), ("n0", int), ("n", int), ("seed", int), ("tau", float), ("alpha", float)):
            object.__setattr__(self, name, _typed(name, getattr(self, name), kind))
        if not isinstance(self.correction, str):
            raise SettingTypeError(
                f"correction={self.correction!r} is invalid: expected a string, 'bonferroni' or 'holm' "
                f"(got {type(self.correction).__name__})"
            )
        from certified_circuits.core.validation import (
            check_alpha,
            check_correction,
            check_count,
            check_p_del,
            check_tau,
        )

        check_p_del(self.p_del)
        check_count("n0", self.n0, minimum=1)
        check_count("n", self.n, minimum=1)
        check_count("seed", self.seed, minimum=0)
        if self.seed >= 2**63:
            raise ValueError(f"seed={self.seed!r} is invalid: expected an integer in [0, 2**63)")
        check_tau(self.tau)
        check_alpha(self.alpha)
        check_correction(self.correction)

    @classmethod
    def from_config(cls, block: Mapping[str, Any], **changes: Any) -> "Setting":
        values = {**block, **changes}
        return cls(
            p_del=float(values["p_del"]),
            n0=int(values["n0"]),
            n=int(values["n"]),
            seed=int(values["seed"]),
            tau=float(values["tau"]),
            alpha=float(values["alpha"]),
            correction=str(values["correction"]),
        )

    def replace(self, **changes: Any) -> "Setting":
        return Setting.from_config(self.__dict__, **changes)

    @property
    def votes_tag(self) -> str:
        return votes_tag(self.p_del, self.n0, self.n, self.seed)

    @property
    def decision_tag(self) -> str:
        return decision_tag(self.tau, self.alpha, self.correction)

    @property
    def tag(self) -> str:
        """``{setting}/{decision}``: the name of this setting in tables."""
        return f"{self.votes_tag}/{self.decision_tag}"

    @classmethod
    def from_tag(cls, tag: str) -> "Setting":
        """The setting a :attr:`tag` names: its exact inverse, for data whose only record of the setting is the
        tag (a table's ``setting`` column); anything that has the values as columns or attributes reads those.
        Built from the inverses of the two parts, :func:`parse_votes_tag` and :func:`parse_decision_tag`.

        Raises:
            ValueError: ``tag`` is not ``p{p_del}_n0{n0}_n{n}_s{seed}/t{tau}_a{alpha}_{correction}`` as
                :attr:`tag` writes it (numbers exact), or names an invalid setting; the message names the tag,
                the expected form and the bad field.
        """
        return cls(**parse_tag(tag, ("votes", "decision")))


def votes_tag(p_del: float | str, n0: int | str, n: int | str, seed: int | str) -> str:
    return f"p{_text(p_del)}_n0{_text(n0)}_n{_text(n)}_s{_text(seed)}"


def decision_tag(tau: float | str, alpha: float | str, correction: str) -> str:
    return f"t{_text(tau)}_a{_text(alpha)}_{correction}"


def _text(value: float | int | str) -> str:
    """Wildcard placeholders (``"{tau}"``) pass through; numbers are written exactly."""
    return value if isinstance(value, str) else number(value)


def parse_votes_tag(tag: str) -> dict[str, float | int]:
    """The exact inverse of :attr:`Setting.votes_tag`: the votes' part of a setting (Algorithm 2).

    Args:
        tag: ``p{p_del}_n0{n0}_n{n}_s{seed}`` as :func:`votes_tag` writes it (numbers exact: ``p0.6``, not ``p0.60``).

    Returns:
        ``{"p_del": float, "n0": int, "n": int, "seed": int}``, so that
        ``votes_tag(**parse_votes_tag(t)) == t`` and ``setting.replace(**parse_votes_tag(setting.votes_tag)) == setting``.

    Raises:
        ValueError: naming the tag, the expected form and the bad field (a field that is not a number, is out of
            the Setting's range, or is not written as :func:`votes_tag` writes it).
    """
    return parse_tag(tag, ("votes",))


def parse_decision_tag(tag: str) -> dict[str, float | str]:
    """The exact inverse of :attr:`Setting.decision_tag`: the test's part of a setting (Algorithm 1).

    Args:
        tag: ``t{tau}_a{alpha}_{correction}`` as :func:`decision_tag` writes it (``t0.95_a0.001_bonferroni``).

    Returns:
        ``{"tau": float, "alpha": float, "correction": str}``, so that ``decision_tag(**parse_decision_tag(t)) == t``.

    Raises:
        ValueError: naming the tag, the expected form and the bad field.
    """
    return parse_tag(tag, ("decision",))


#: each part of a tag: its fields in order, each as (field, prefix in the tag, type); the fields are joined by "_"
_PARTS: dict[str, tuple[tuple[str, str, type], ...]] = {
    "votes": (("p_del", "p", float), ("n0", "n0", int), ("n", "n", int), ("seed", "s", int)),
    "decision": (("tau", "t", float), ("alpha", "a", float), ("correction", "", str)),
}
#: each part's form and its writer
_FORMS = {"votes": "p{p_del}_n0{n0}_n{n}_s{seed}", "decision": "t{tau}_a{alpha}_{correction}"}
_WRITERS: dict[str, Callable[..., str]] = {"votes": votes_tag, "decision": decision_tag}


def parse_tag(tag: str, parts: tuple[str, ...]) -> dict[str, Any]:
    """The fields a tag of ``parts`` names: the one reader of every tag (parts joined by ``/``, each part's fields
    by ``_``); each field is parsed, checked by :class:`Setting` and must be written back exactly.

    Args:
        tag: the tag.
        parts: ``("votes",)``, ``("decision",)`` or both, in the order of :attr:`Setting.tag`.

    Returns:
        The fields of ``parts`` by name, as Python ``float``, ``int`` and ``str``.

    Raises:
        ValueError: ``'{tag}' is not a {name} ({form}, e.g. {example}): ...`` for the form (naming the field at
            fault), ``'{tag}' does not name a valid setting: ...`` for a field that is not a number or is out of
            range, ``'{tag}' is not a {name} as {writer} writes it (...)`` for a field written otherwise
            (``p0.60``, ``s007``).
    """
    name = "setting tag" if len(parts) > 1 else f"{parts[0]} tag"
    writer = "Setting.tag" if len(parts) > 1 else f"Setting.{parts[0]}_tag"
    form = "/".join(_FORMS[part] for part in parts)
    example = "/".join(getattr(Setting(), f"{part}_tag") for part in parts)
    refusal = f"is not a {name} ({form}, e.g. {example})"
    if not isinstance(tag, str):
        raise ValueError(f"{tag!r} {refusal}: expected a string, got {type(tag).__name__}")
    pieces = tag.split("/")
    if len(pieces) != len(parts):
        raise ValueError(f"{tag!r} {refusal}: it has {len(pieces)} part(s) joined by '/', expected {len(parts)}")
    raw: dict[str, str] = {}
    kinds: dict[str, type] = {}
    for piece, part in zip(pieces, parts):
        fields = _PARTS[part]
        words = piece.split("_")
        if len(words) != len(fields):
            raise ValueError(
                f"{tag!r} {refusal}: {piece!r} has {len(words)} field(s) joined by '_', expected {len(fields)}"
            )
        for word, (field, prefix, kind) in zip(words, fields):
            if not word.startswith(prefix) or len(word) == len(prefix):
                raise ValueError(f"{tag!r} {refusal}: field {field} is {word!r}, expected {prefix}{{{field}}}")
            raw[field], kinds[field] = word[len(prefix) :], kind
    values: dict[str, Any] = {}
    for field, text in raw.items():
        try:
            values[field] = kinds[field](text)
        except ValueError:
            what = "an integer" if kinds[field] is int else "a number"
            raise ValueError(f"{tag!r} does not name a valid setting: {field} {text!r} is not {what}") from None
    try:
        Setting(**values)  # the Setting's own checks, naming the field
    except ValueError as error:
        raise ValueError(f"{tag!r} does not name a valid setting: {error}") from error
    for field, text in raw.items():
        if _text(values[field]) != text:
            canonical = "/".join(_WRITERS[part](*(values[f] for f, _prefix, _kind in _PARTS[part])) for part in parts)
            raise ValueError(
                f"{tag!r} is not a {name} as {writer} writes it ({canonical!r}): {field} is written "
                f"{_text(values[field])!r}, not {text!r}"
            )
    return values
