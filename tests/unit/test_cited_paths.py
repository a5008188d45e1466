"""Every file path that the source, the docs, the workflow or the README names inside the repository exists (issue 43:
docstrings cited ``/tmp/...`` notes, a design note outside the repository and test files that had moved).

A path counts when it starts with one of the repository's top folders and ends in a file extension; the files of
another repository that a docstring cites with that repository named (hannamw/EAP-IG's ``src/eap/...``) are
listed in :data:`OTHER_REPOSITORIES`.
"""

from __future__ import annotations

import re

from tests.helpers.paths import ROOT

TOP_FOLDERS = ("docs", "tests", "src", "configs", "rules", "benchmarks", "bin", "profiles", "envs", "report",
               "experiments")
CITED = re.compile(rf"\b(?:{'|'.join(TOP_FOLDERS)})/[A-Za-z0-9_./-]+\.(?:py|md|yaml|smk|sh|txt|json|csv|toml)\b")
#: paths of other repositories, cited with the repository named beside them
OTHER_REPOSITORIES = ("src/eap/",)
#: a path in a *file* of the result tree or a home folder, not of the repository
NOT_REPOSITORY = re.compile(r"(?:results|RESULTS|~|\$\w+|\{\w+\})/$")


def citing_files() -> list:
    files = [ROOT / "README.md", ROOT / "Snakefile", ROOT / "Makefile", ROOT / "config.schema.yaml"]
    files += sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "rules").glob("*.smk"))
    return files


def test_every_cited_path_exists() -> None:
    missing, checked = [], 0
    for path in citing_files():
        text = path.read_text()
        for match in CITED.finditer(text):
            cited = match.group(0)
            before = text[max(0, match.start() - 12):match.start()]
            if cited.startswith(OTHER_REPOSITORIES) or NOT_REPOSITORY.search(before):
                continue
            checked += 1
            if not (ROOT / cited).exists():
                line = text.count("\n", 0, match.start()) + 1
                missing.append(f"{path.relative_to(ROOT)}:{line}: {cited}")
    assert checked > 100, checked  # the pattern still finds the citations
    assert not missing, "\n".join(missing)


def test_the_pattern_finds_a_missing_path_and_skips_other_repositories() -> None:
    text = "see tests/unit/test_nothing_here.py and hannamw/EAP-IG's src/eap/graph.py, results/tables/x.csv"
    found = [m.group(0) for m in CITED.finditer(text)]
    assert found == ["tests/unit/test_nothing_here.py", "src/eap/graph.py"]
    assert not (ROOT / found[0]).exists() and found[1].startswith(OTHER_REPOSITORIES)
