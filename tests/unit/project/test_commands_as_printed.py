"""Every command the project prints or documents runs as printed in a fresh shell after ``make`` (issue 35, item 4).

The project's commands start with ``bin/certified-circuits`` (:data:`certified_circuits.commands.COMMAND`): a wrapper, like
``bin/workflow``, that runs the virtual environment's ``certified-circuits`` without activating anything. This
test extracts the commands of README.md and docs/*.md (code blocks and code spans), of the messages in the
source (every string literal that is not a docstring, f-strings included, and the Snakefile), and of the
planner's fixes, and checks that each resolves: the executable exists (in the checkout or the environment), the
stage exists in the CLI parser and each option is one of that stage's. The plan commands are run for real,
through the wrapper, in a shell whose PATH holds only the system's folders.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import certified_circuits as cc
from certified_circuits.commands import COMMAND, plan_command
from certified_circuits.cli.main import build_parser
from certified_circuits.cli.stages import SETTING_WORDS
from certified_circuits.cli.stages import option as option_of
from certified_circuits.pipeline.plans.setting_plans import plan_command as config_plan_command
from tests.helpers.paths import ROOT

SOURCE = ROOT / "src" / "certified_circuits"
ENV_BIN = Path(sys.executable).parent  # the environment `make` installed (.venv/bin)

#: pages and modules whose bare commands other branches own (issue 36: docs/mib.md; issue 35's tasks owner:
#: language/tasks.py); each holds exactly the bare commands listed, so a new one elsewhere fails
OWNED_ELSEWHERE: dict[str, int] = {}

#: stages whose --help example names an option the stage lacks (none left)
HELP_OWNED_ELSEWHERE: set[str] = set()

#: executables a documented command may start with, besides the checkout's bin/ and the environment's .venv/bin/
SYSTEM = {"cat", "ls", "cd", "export", "for", "do", "done", "if", "then", "fi", "echo", "mkdir", "cp", "rm", "make",
          "git", "sbatch", "squeue", "scancel", "srun", "sed", "grep", "head", "tail", "while", "open", "xdg-open",
          "python3", "nvidia-smi", "module", "conda", "source", "kill", "sleep", "wait", "chmod", "umask", "tar",
          "curl", "wget", "ssh", "less", "test", "[", "true", "false", "exit", "time", "env", "cut", "sort", "uniq",
          "wc", "find", "xargs", "du", "df", "touch", "mv", "ln", "diff", "pwd", "printf", "read", "set", "unset",
          "#", "case", "esac", "else", "elif", "{", "}", "(", ")", "PY", "YAML"}

#: the project's tools, which a fresh shell does not have on PATH (they are in .venv/bin)
BARE_TOOLS = {"certified-circuits", "snakemake", "mlflow", "pytest", "python", "ruff", "mypy", "pip"}


def stages() -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, set[str]]]:
    """Stage name -> its option strings, -> its required options, and -> the setting words it needs when a command
    gives no ``--setting TAG`` (votes' --p-del: cli/stages.py declares them optional to argparse), from the CLI's own
    parser."""
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    options = {name: {o for a in sub._actions for o in a.option_strings} for name, sub in action.choices.items()}
    required = {name: {a.option_strings[0] for a in sub._actions if a.required and a.option_strings}
                for name, sub in action.choices.items()}
    needs = {name: {option_of(w) for w, default in words.defaults.items() if default is None}
             for name, sub in action.choices.items() if (words := sub.get_default(SETTING_WORDS))}
    return options, required, needs


STAGES, REQUIRED, SETTING_NEEDS = stages()
STAGES["batch"] = set()  # `certified-circuits batch STAGE ARGS :: STAGE ARGS`: each invocation is checked below
BARE = re.compile(r"(?<![\w./-])certified-circuits ([a-z][a-z0-9-]*)")
PREFIXED = re.compile(re.escape(COMMAND) + r" ([a-z][a-z0-9-]*)((?:[ \t]+[^\s`'\"),;|][^\s`'\",;|]*)*)")


def check_stage_command(text: str, where: str) -> None:
    """``text`` starts with ``COMMAND STAGE``: the stage exists and every ``--option`` is one of its options
    (``COMMAND STAGE ...``, with a placeholder for the stage, names no stage)."""
    if re.match(re.escape(COMMAND) + r" ([A-Z]+|--help|--version)\b", text):
        return
    found = PREFIXED.match(text)
    assert found, f"{where}: {text!r} is not a {COMMAND} command"
    stage, rest = found.group(1), found.group(2)
    assert stage in STAGES, f"{where}: {text!r}: no stage {stage!r} in {COMMAND} --help"
    invocations = [[stage, *rest.split()]]
    if stage == "batch":
        words, invocations = rest.split(), [[]]
        for word in words:
            invocations.append([]) if word == "::" else invocations[-1].append(word)
    for words in invocations:
        if not words or words[0] not in STAGES:
            continue  # a placeholder (ARGS, ...)
        given = [w.split("=", 1)[0] for w in words[1:] if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", w)]
        for option in given:
            assert option in STAGES[words[0]] or option == "--help", (
                f"{where}: {text!r}: {words[0]} has no option {option} (it has {sorted(STAGES[words[0]])})")
        if given and "--help" not in given and "..." not in words and "ARGS" not in words:
            # a whole command (options given, nothing elided): it names every required option, so it runs as printed
            needs = REQUIRED.get(words[0], set()) | (set() if "--setting" in given else SETTING_NEEDS.get(words[0], set()))
            missing = needs - set(given)
            assert not missing, f"{where}: {text!r}: {words[0]} also needs {sorted(missing)}"


# ------------------------------------------------------------------------------------------------ the docs


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def shell_lines(page: Path) -> list[tuple[int, str]]:
    """The command lines of a page's shell code blocks (no language, sh, bash, console, shell): continuation lines
    joined, heredoc bodies, comments and printed output (a ``$ `` block's lines without ``$``) left out."""
    text = page.read_text()
    lines: list[tuple[int, str]] = []
    for block in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S):
        if block.group(1) not in ("", "sh", "bash", "console", "shell"):
            continue
        first = text[: block.start(2)].count("\n") + 1
        body = block.group(2).splitlines()
        prompted = any(line.startswith("$ ") for line in body)
        heredoc, joined, start = None, "", 0
        for offset, line in enumerate(body):
            if heredoc is not None:
                heredoc = None if line.strip() == heredoc else heredoc
                continue
            if prompted and not line.startswith("$ ") and not joined:
                continue  # a prompted block's output
            line = line.removeprefix("$ ")
            joined, start = (joined + " " + line.strip() if joined else line.strip()), (start if joined else offset)
            if joined.endswith("\\"):
                joined = joined[:-1].rstrip()
                continue
            marker = re.search(r"<<-?\s*'?\"?(\w+)'?\"?", joined)
            if marker:
                heredoc = marker.group(1)
            if joined and not joined.startswith("#"):
                lines.append((first + start, joined.split("  #")[0].strip()))
            joined = ""
    return lines


def commands_of(line: str) -> list[str]:
    """The simple commands of a shell line (split at ``&&``, ``||``, ``;``, ``|``, ``&``), without env prefixes."""
    found = []
    for part in re.split(r"&&|\|\||;|\||&(?!\d)", line):
        words = part.strip().split()
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
            words = words[1:]
        if words:
            found.append(" ".join(words))
    return found


def test_the_wrapper_runs_from_a_fresh_shell() -> None:
    """``bin/certified-circuits`` from the checkout's root, with only the system's folders on PATH (what a new
    terminal has after ``make``): the environment's command, no venv activated."""
    done = subprocess.run(["bash", "-c", f"{COMMAND} --version"], cwd=ROOT, env=fresh_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"certified-circuits {cc.__version__}"


def test_the_wrapper_says_what_to_do_without_an_environment(tmp_path: Path) -> None:
    env = {**fresh_env(), "VENV": str(tmp_path / "no-venv")}
    done = subprocess.run([str(ROOT / COMMAND), "--version"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert f"certified-circuits not found: run 'make' first in {ROOT}" in done.stderr


def fresh_env() -> dict[str, str]:
    """A new terminal's environment: the system's PATH, no venv; the environment `make` made is found by the
    wrapper (VENV when it is not the checkout's .venv). PYTHONPATH is kept where a test run sets it."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}
    if not (ROOT / ".venv" / "bin" / "certified-circuits").exists():
        env["VENV"] = str(ENV_BIN.parent)
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_documented_command_resolves(page: Path) -> None:
    name = str(page.relative_to(ROOT))
    text = page.read_text()
    bare = [m.group(0) for m in BARE.finditer(text) if m.group(1) in STAGES]
    assert len(bare) == OWNED_ELSEWHERE.get(name, 0), f"{name}: bare commands (write {COMMAND} ...): {bare}"
    for number, line in shell_lines(page):
        for command in commands_of(line):
            first = command.split()[0]
            where = f"{name}:{number}"
            if first.startswith(("bin/", ".venv/bin/")):
                path = ROOT / first if first.startswith("bin/") else ENV_BIN / first.removeprefix(".venv/bin/")
                assert path.exists() and os.access(path, os.X_OK), f"{where}: {first} does not exist"
                if first == COMMAND:
                    check_stage_command(command, where)
            elif not (first == "certified-circuits" and name in OWNED_ELSEWHERE):
                assert first not in BARE_TOOLS, f"{where}: {command!r}: {first} is not on a fresh shell's PATH; " \
                                                f"write .venv/bin/{first} (or {COMMAND})"
    for span in re.findall(r"`([^`\n]+)`", text):
        if span.startswith(COMMAND + " "):
            check_stage_command(span, f"{name} `{span}`")


# -------------------------------------------------------------------------------------------- the messages


def message_strings(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module that is not a docstring; an f-string with its fields as ``VALUE``."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    inside_fstrings = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            found.append((node.lineno, "".join(_field(v) for v in node.values)))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and id(node) not in inside_fstrings):
            found.append((node.lineno, node.value))
    return found


def _field(value: ast.expr) -> str:
    """An f-string part: its text, ``COMMAND``'s value for ``{COMMAND}``, ``VALUE`` for any other field."""
    if isinstance(value, ast.Constant):
        return str(value.value)
    if isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name) and value.value.id == "COMMAND":
        return COMMAND
    return "VALUE"


def test_every_message_command_resolves() -> None:
    checked = 0
    for path in sorted(SOURCE.rglob("*.py")):
        name = str(path.relative_to(ROOT))
        bare = []
        for line, text in message_strings(path):
            bare += [f"{line}: {m.group(0)}" for m in BARE.finditer(text) if m.group(1) in STAGES]
            for found in re.finditer(re.escape(COMMAND) + r" [a-z]", text):
                check_stage_command(text[found.start():], f"{name}:{line}")
                checked += 1
        assert len(bare) == OWNED_ELSEWHERE.get(name, 0), f"{name}: bare commands (use certified_circuits.commands.COMMAND): {bare}"
    snakefile = [line for line in (ROOT / "Snakefile").read_text().splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in snakefile if BARE.search(line) and BARE.search(line).group(1) in STAGES]
    assert checked >= 10  # the messages' commands were found


def test_bin_workflow_finds_what_it_runs_the_same_way() -> None:
    text = (ROOT / "bin" / "workflow").read_text()
    assert 'venv=${VENV:-.venv}' in text and 'venv=${VENV:-.venv}' in (ROOT / COMMAND).read_text()


def test_the_bin_scripts_call_the_cli_through_the_wrapper() -> None:
    """bin/model-seeds runs from a fresh shell too: its own certified-circuits calls go through the wrapper (a bare
    one failed with "command not found" after the workflows of every seed had run). bin/workflow puts the
    environment on PATH for itself and snakemake's jobs."""
    for script in sorted((ROOT / "bin").iterdir()):
        if script.name in ("workflow", "certified-circuits"):
            continue
        lines = [line for line in script.read_text().splitlines() if not line.lstrip().startswith("#")]
        bare = [line.strip() for line in lines if (m := BARE.search(line)) and m.group(1) in STAGES]
        assert not bare, f"bin/{script.name}: {bare}: call {COMMAND} (the script runs from the checkout's root)"
        for line in lines:
            for found in re.finditer(re.escape(COMMAND) + r" [a-z]", line):
                check_stage_command(line[found.start():], f"bin/{script.name}")


# ---------------------------------------------------------------------------------- the planner's commands


def run(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=ROOT, env=fresh_env(), capture_output=True, text=True,
                          timeout=300)


def test_the_plan_commands_of_warnings_and_errors_run_as_printed() -> None:
    """The command a vacuous config's error and the reports' flags print (:func:`plan_command`), run as printed."""
    vacuous = cc.plan(12, 48, cc.Setting(p_del=0.6000001, tau=0.9999999, n=5))
    printed = config_plan_command(vacuous)
    assert printed.startswith(f"{COMMAND} plan --examples 12 --components 48 --p-del 0.6000001 --tau 0.9999999 ")
    known = plan_command(40, 4, p_del=0.6, tau=0.95, n=1000, alpha=0.001)
    assert known == f"{COMMAND} plan --examples 40 --components 4 --p-del 0.6 --tau 0.95 --alpha 0.001 --n 1000"
    import numpy as np

    from_attrs = plan_command(np.int64(40), 4, p_del=np.float64(0.6), tau=np.float64(0.9999999), correction=b"holm")
    assert from_attrs == f"{COMMAND} plan --examples 40 --components 4 --p-del 0.6 --tau 0.9999999 --correction holm"
    unknown = plan_command(None, 4, tau=0.95)
    assert unknown == f"{COMMAND} plan --help"
    for command in (printed, known, unknown):
        check_stage_command(command, "plan_command")
    both = run(f"{printed} && echo ---- && {known} && echo ---- && {unknown}")
    assert both.returncode == 0, both.stderr
    first, second, third = both.stdout.split("----\n")
    assert str(vacuous) in first and "verdict: vacuous" in first
    assert str(cc.plan(40, 4, cc.Setting(p_del=0.6, tau=0.95, n=1000))) in second
    assert "usage: certified-circuits plan" in third


def test_the_readme_plan_command_runs_as_printed() -> None:
    readme = (ROOT / "README.md").read_text()
    [command] = re.findall(r"^\$ (bin/certified-circuits plan .*)$", readme, flags=re.M)
    done = run(command)
    assert done.returncode == 0, done.stderr
    shown = readme[readme.index(command) + len(command) + 1:].split("```")[0]
    assert done.stdout.strip() == shown.strip()


def test_every_stage_help_example_resolves() -> None:
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    examples = 0
    for name, sub in action.choices.items():
        description = sub.description or ""
        assert not [m for m in BARE.finditer(description) if m.group(1) in STAGES], f"{name} --help: {description}"
        for found in re.finditer(re.escape(COMMAND) + r" [a-z]", description):
            if name in HELP_OWNED_ELSEWHERE:
                continue
            check_stage_command(" ".join(description[found.start():].split()), f"{name} --help")
            examples += 1
    assert examples >= 5


def test_batch_and_placeholders_are_understood() -> None:
    check_stage_command(f"{COMMAND} batch vision-attribute --model world ... :: vision-attribute --model world ...", "t")
    with pytest.raises(AssertionError, match="also needs"):
        check_stage_command(f"{COMMAND} certify --votes v.h5 --out c.h5", "t")
    with pytest.raises(AssertionError, match="no option --bogus"):
        check_stage_command(f"{COMMAND} plan --examples 4 --bogus 1", "t")
    with pytest.raises(AssertionError, match="no stage 'nope'"):
        check_stage_command(f"{COMMAND} nope --x", "t")
    assert commands_of("A=1 bin/workflow -n && cat x | head") == ["bin/workflow -n", "cat x", "head"]
    assert shlex.split("a 'b c'") == ["a", "b c"]
