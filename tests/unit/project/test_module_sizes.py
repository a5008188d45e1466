"""Rooms a newcomer can find things in (issue 52): no module of the package is over 500 lines unless it is named below
with the one job that needs the length, and the workflow builds each domain's certification settings from a config
in one function (``pipeline/plans/vision.py`` ``vision_setting``, ``pipeline/plans/language.py``
``language_settings``); every other place asks it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.paths import ROOT

PACKAGE = ROOT / "src" / "certified_circuits"
MAX_LINES = 500

#: modules over MAX_LINES, each with the one job that needs the length (package-relative path -> reason)
LONG_MODULES = {
    "reports/explorer.py": "one job, the explorer's pages (its data is explorer_data.py, its HTML parts html.py)",
    "core/smoothing.py": "one job, vote counting: the numpy and torch paths of one count over two mask streams",
    "reports/flags.py": "one list of every degenerate-result check, its one implementation (issue 35)",
    "vision/evaluate.py": "one job, vision sufficiency: ablation hooks, one pass per eval set, the tidy table",
    "reports/testbed.py": "one job, the testbed's tables and figure (recovery, stability, truth size)",
    "reports/figures.py": "one job, the paper's figures, rendered from computed tables",
    "language/forward.py": "one job, the node-decomposed GPT-2 forward that attribution and patching share",
    "core/planning.py": "one job, the exact certification planner (numbers, verdict, problems, suggestions)",
    "cli/vision_data.py": "the embedded world's four stages (vision-world, -train, -filter-ood, -compile)",
    "analysis/recovery.py": "recovery of a known circuit, with its ground-truth format's one reader and one writer",
    "vision/ground_truth.py": "one job, the causal verification of both testbed ResNets' class circuits",
    "analysis/evaluation.py": "one job, the paper's aggregate evaluations of the sufficiency tables",
    "language/models.py": "one job, loading a causal LM through TransformerBridge, with its checks",
    "vision/networks/compiled.py": "one job, the hand-set marked ResNet: its spec, weights and closed-form checks",
}

#: the one builder of each domain's workflow settings: (package-relative path, function)
SETTING_BUILDERS = {("pipeline/plans/vision.py", "vision_setting"), ("pipeline/plans/language.py", "language_settings")}


def _modules() -> dict[str, Path]:
    return {p.relative_to(PACKAGE).as_posix(): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_over_500_lines_unless_one_job_needs_it() -> None:
    long = {name: _lines(path) for name, path in _modules().items() if _lines(path) > MAX_LINES}
    unexplained = {name: n for name, n in long.items() if name not in LONG_MODULES}
    assert not unexplained, (f"modules over {MAX_LINES} lines: {unexplained}; split each by job (as pipeline/plans/ "
                             "is split by domain), or name it in LONG_MODULES with the one job that needs the length")


def test_every_long_module_named_is_still_long() -> None:
    """The list says what is true: a module that is back under the limit leaves it."""
    modules = _modules()
    stale = sorted(name for name in LONG_MODULES if name not in modules or _lines(modules[name]) <= MAX_LINES)
    assert not stale, f"LONG_MODULES names {stale}, which no longer exist or are {MAX_LINES} lines or fewer: remove them"
    assert all(reason and "\n" not in reason for reason in LONG_MODULES.values())


def _setting_calls(tree: ast.AST) -> list[tuple[ast.Call, str | None]]:
    """Every ``Setting(...)`` and ``Setting.from_config(...)`` call, with the function it is in (None: module level)."""
    found: list[tuple[ast.Call, str | None]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                func = child.func
                if (isinstance(func, ast.Name) and func.id == "Setting") or (
                        isinstance(func, ast.Attribute) and func.attr in ("Setting", "from_config")
                        and (func.attr == "Setting" or isinstance(func.value, (ast.Name, ast.Attribute))
                             and ast.unparse(func.value).endswith("Setting"))):
                    found.append((child, function))
            visit(child, inner)

    visit(tree, None)
    return found


def _reads_certification_block(call: ast.Call) -> bool:
    """Does the call read a config's ``certification`` block (``config[...]["certification"]``, ``cert``-like names
    bound from it are caught by the pipeline rule below)?"""
    return any(isinstance(node, ast.Constant) and node.value == "certification" for node in ast.walk(call))


def test_the_workflow_builds_each_domains_settings_in_one_function() -> None:
    """In the workflow's package (pipeline/), a Setting is built only in the two builders; anywhere in the package, a
    Setting built from a config's certification block is built there too; the rules and the Snakefile build none."""
    builders, stray = set(), []
    for name, path in _modules().items():
        for call, function in _setting_calls(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            where = f"{name}:{call.lineno} ({function or 'module level'})"
            if (name, function) in SETTING_BUILDERS:
                builders.add((name, function))
            elif name.startswith("pipeline/") or _reads_certification_block(call):
                stray.append(where)
    assert builders == SETTING_BUILDERS, f"a domain's builder builds no Setting: {SETTING_BUILDERS - builders}"
    assert not stray, f"Settings built from a config outside the builders {sorted(SETTING_BUILDERS)}: {stray}"
    for path in [*(ROOT / "rules").glob("*.smk"), ROOT / "Snakefile"]:
        text = path.read_text(encoding="utf-8")
        assert "Setting(" not in text and "from_config(" not in text, f"{path.relative_to(ROOT)} builds a Setting"


def test_the_setting_scan_finds_a_stray_builder() -> None:
    """The scan sees both forms, in a function and at module level, and what reads a certification block."""
    source = ('from x import Setting\nS = Setting.from_config(config["vision"]["certification"])\n'
              'def f(c):\n    return Setting(p_del=c["p_del"])\n')
    calls = _setting_calls(ast.parse(source))
    assert [(call.lineno, function) for call, function in calls] == [(2, None), (4, "f")]
    assert [_reads_certification_block(call) for call, _ in calls] == [True, False]
