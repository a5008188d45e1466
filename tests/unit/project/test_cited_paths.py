"""Every file path that the source, the tests, the configs, the benchmarks, the docs, the workflow or the README names
inside the repository exists (issue 43: docstrings cited ``/tmp/...`` notes, a design note outside the repository and
test files that had moved; issue 52: the tests, configs and benchmarks cited the design note and moved tests too).

A path counts when it starts with one of the repository's top folders and ends in a file extension, or when it is one
of the top-level documents of :data:`TOP_DOCUMENTS` (the design note, which lives outside the repository, was cited
by its name alone); the files of another repository that a docstring cites with that repository named (hannamw/EAP-IG's
``src/eap/...``) are listed in :data:`OTHER_REPOSITORIES`.
"""

from __future__ import annotations

import re

from tests.helpers.paths import ROOT

TOP_FOLDERS = ("docs", "tests", "src", "configs", "rules", "benchmarks", "bin", "profiles", "envs", "report",
               "experiments")
#: top-level documents cited by name alone (a name in capitals elsewhere, ``STEM.md``, is a placeholder)
TOP_DOCUMENTS = ("README", "DESIGN", "CHANGELOG", "CONTRIBUTING", "NOTES", "TODO")
CITED = re.compile(rf"\b(?:{'|'.join(TOP_FOLDERS)})/[A-Za-z0-9_./-]+\.(?:py|md|yaml|smk|sh|txt|json|csv|toml)\b"
                   rf"|(?<![\w./-])(?:{'|'.join(TOP_DOCUMENTS)})\.md\b")
#: paths of other repositories, cited with the repository named beside them
OTHER_REPOSITORIES = ("src/eap/",)
#: a path in a *file* of the result tree or a home folder, not of the repository
NOT_REPOSITORY = re.compile(r"(?:results|RESULTS|~|\$\w+|\{\w+\})/$")


#: the folders whose files are read, and the files' extensions
CITING_FOLDERS = ("src", "tests", "configs", "benchmarks", "docs", "rules", "experiments", "bin")
CITING_SUFFIXES = (".py", ".md", ".yaml", ".smk", ".sh", "")


def citing_files() -> list:
    files = [ROOT / "README.md", ROOT / "Snakefile", ROOT / "Makefile", ROOT / "config.schema.yaml"]
    for folder in CITING_FOLDERS:
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in CITING_SUFFIXES
                        and "__pycache__" not in p.parts and (p.suffix or folder == "bin"))
    return files


def test_the_scan_covers_every_folder_the_issue_names() -> None:
    """src, tests, configs, benchmarks, docs and the README (issue 52, item 7), and the workflow's files."""
    files = {p.relative_to(ROOT).as_posix() for p in citing_files()}
    for one in ("README.md", "Snakefile", "src/certified_circuits/api.py", "tests/helpers/paper_fixtures.py",
                "tests/unit/project/test_cited_paths.py", "configs/paper_fixture.yaml", "benchmarks/bench_language_eap.py",
                "benchmarks/gpu_session.sh", "docs/architecture.md", "rules/language.smk", "bin/certified-circuits"):
        assert one in files, one


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
    # written in pieces: this file is scanned too, and the missing names must not be cited by it
    gone, note = "tests/unit/" + "test_nothing_here.py", "CHANGE" + "LOG.md"
    text = f"see {gone} and hannamw/EAP-IG's src/eap/graph.py, results/tables/x.csv, {note}, STEM.md, docs/index.md"
    found = [m.group(0) for m in CITED.finditer(text)]
    assert found == [gone, "src/eap/graph.py", note, "docs/index.md"]
    assert not (ROOT / found[0]).exists() and found[1].startswith(OTHER_REPOSITORIES)
    assert not (ROOT / found[2]).exists()
