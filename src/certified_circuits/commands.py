"""How the project's shell commands are written: the one owner of the command line's words.

The engine (``core``) computes what a setting can certify and refuses what it must; it never names the program that
a shell runs. Every message, warning or fix above it that tells the user what to run writes it from here
(docs/architecture.md, section 1: this module is a layer of its own, just above ``core``).
"""

from __future__ import annotations

from typing import Any

from certified_circuits.core.setting import number

#: How every command the project prints (errors, warnings, plan fixes) or documents starts: the checkout's
#: wrapper, which runs the project's virtual environment's ``certified-circuits`` from a fresh shell after
#: ``make``, in the checkout's root, with nothing activated (bin/certified-circuits; README, "Commands").
COMMAND = "bin/certified-circuits"

#: the options of ``certified-circuits plan`` that :func:`plan_command` writes, by Setting field
PLAN_OPTIONS = {
    "p_del": "--p-del",
    "tau": "--tau",
    "alpha": "--alpha",
    "n": "--n",
    "n0": "--n0",
    "correction": "--correction",
}


def plan_command(n_examples: int | None, n_components: int | None, radius: int | None = None, **setting: Any) -> str:
    """The command line that prints the exact plan of a setting, runnable as printed from the checkout's root in a
    fresh shell (:data:`COMMAND`): the one place a plan command is written (plan warnings, config errors, the
    reports' flags).

    Args:
        n_examples: ``|D|``; None when unknown (the command is then ``plan --help``).
        n_components: ``U``; None when unknown (likewise).
        radius: ``--radius`` (list settings that reach it), or None.
        **setting: any of ``p_del, tau, alpha, n, n0, correction`` (:data:`PLAN_OPTIONS`); a None value is left
            out (the command's default). Numbers are written exactly (:func:`~certified_circuits.core.setting.number`).

    Returns:
        ``"bin/certified-circuits plan --examples 100 --components 262 --p-del 0.99 --tau 0.9"``.

    Raises:
        TypeError: a setting field the plan command does not take.
    """
    if n_examples is None or n_components is None:
        return f"{COMMAND} plan --help"
    unknown = sorted(set(setting) - set(PLAN_OPTIONS))
    if unknown:
        raise TypeError(
            f"plan_command: unknown setting field(s) {unknown}; the plan command takes {sorted(PLAN_OPTIONS)}"
        )
    words = [COMMAND, "plan", "--examples", str(int(n_examples)), "--components", str(int(n_components))]
    for name, option in PLAN_OPTIONS.items():
        value = setting.get(name)
        if value is None:
            continue
        if hasattr(value, "item"):  # a numpy scalar (an HDF5 attribute)
            value = value.item()
        if isinstance(value, bytes):
            value = value.decode()
        words += [option, value if isinstance(value, str) else number(value)]
    if radius is not None:
        words += ["--radius", str(int(radius))]
    return " ".join(words)


def certify_command(votes: str) -> str:
    """The command that certifies a votes file: the fix of a certificates file that was not made from it.

    Args:
        votes: the votes file as the message names it (its path).

    Returns:
        ``"bin/certified-circuits certify --votes VOTES --tau TAU --out CERTS.h5"``.
    """
    return f"{COMMAND} certify --votes {votes} --tau TAU --out CERTS.h5"
