"""Every ```python block of README.md and docs/*.md runs, as a reader would run it.

The blocks of one file run top to bottom in one namespace (``__name__ == "__main__"``, as in a script), in
a temporary working directory that holds what the file's examples open (:data:`FIXTURES`: built here,
small and random; nothing is downloaded). Each block is one test, named ``FILE:LINE`` of its opening
fence, and a traceback points at the Markdown file's own lines.

A comment on the line(s) right before a fence tells the test more (``<!-- docs-test: KEY (ARG) -->``):

- ``skip (reason)``: a python block that cannot run here (a GPU, real weights); the reason is required.
- ``certifies (in)``, ``(out)`` or ``(in, out)``: the text says the block certifies components; the
  certificates the block makes must hold at least one component certified on each side named.
- ``output``: a fence whose text is exactly what the python block before it prints (stdout).
  ``output (tolerance 10%)``: the words exactly, every number within 10% of the one shown (at least 1
  for integers): for outputs computed in float32 by a model, which another CPU rounds differently (a
  channel whose vote count sits at the critical count can then flip).
- ``cli``: a fence ``$ bin/certified-circuits ARGS`` followed by exactly what that command prints.

Whatever the markers, every :class:`~certified_circuits.api.Certificate` a block makes must certify at
least one component (an example never shows a setting that certifies nothing), and a block's setting
must plan ``ok``: a :class:`~certified_circuits.core.planning.PlanWarning` fails it.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from tests.helpers import custom_fixtures
from tests.helpers.paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<key>[a-z]+)\s*(?:\((?P<arg>[^)]*)\))?\s*-->\s*$")
FENCE = re.compile(r"^\s*```(?P<lang>[A-Za-z0-9_+-]*)\s*$")
KEYS = {"skip", "certifies", "output", "cli"}
SIDES = {"in": 1, "out": 0}


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    markers: dict[str, str | None] = field(default_factory=dict)
    expected_output: str | None = None  # the text of the `output` fence after it
    output_tolerance: str | None = None  # "tolerance N%" of that fence's marker, if any

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def parse(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with the docs-test markers on the lines right above it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        markers: dict[str, str | None] = {}
        j = i - 1
        while j >= 0 and MARKER.match(lines[j]):
            found = MARKER.match(lines[j])
            markers[found["key"]] = None if found["arg"] is None else found["arg"].strip()
            j -= 1
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        blocks.append(Block(path, i + 1, opening["lang"], "\n".join(lines[i + 1 : end]) + "\n", markers))
        i = end + 1
    for before, block in zip(blocks, blocks[1:]):
        if "output" in block.markers and before.lang == "python":
            before.expected_output = block.code
            before.output_tolerance = block.markers["output"]
    return blocks


BLOCKS = [block for path in DOCS for block in parse(path)]
PYTHON = [block for block in BLOCKS if block.lang == "python"]
CLI = [block for block in BLOCKS if "cli" in block.markers]


# ----------------------------------------------------------------------------------------------- fixtures


def custom_vision_tree(root: Path) -> None:
    """What docs/custom_vision.md opens (classes.txt, my_model.pth, data/train/<class>/, my_scorers.py): the
    integration tests' fixture tree, a random-weight ConvNeXt-Tiny of 3 classes and 50 noise images of
    32 px per class."""
    tree = custom_fixtures.build_custom_tree(root, "convnext_tiny", n_per_class=50, image_size=32)
    Path(tree["weights"]).rename(root / "my_model.pth")


#: file (relative to the repository) -> builder of what its examples open, in their working directory
FIXTURES: dict[str, Callable[[Path], None]] = {"docs/custom_vision.md": custom_vision_tree}


@dataclass
class Outcome:
    stdout: str = ""
    error: BaseException | None = None
    certificates: list = field(default_factory=list)


class Reader:
    """Runs the python blocks of one file in order, in one namespace and one working directory."""

    def __init__(self, path: Path, workdir: Path) -> None:
        self.path, self.workdir = path, workdir
        self.blocks = [block for block in PYTHON if block.path == path]
        self.namespace: dict = {"__name__": "__main__", "__builtins__": __builtins__}
        self.outcomes: dict[int, Outcome] = {}
        builder = FIXTURES.get(str(path.relative_to(ROOT)))
        if builder is not None:
            builder(workdir)

    def run_until(self, block: Block) -> Outcome:
        for earlier in self.blocks:
            if earlier.line not in self.outcomes:
                self.outcomes[earlier.line] = self._run(earlier)
            if earlier.line == block.line:
                return self.outcomes[earlier.line]
            if self.outcomes[earlier.line].error is not None:
                pytest.fail(f"an earlier block of this file failed: {earlier.name}")
        raise AssertionError(f"{block.name} is not a python block of {self.path}")

    def _run(self, block: Block) -> Outcome:
        if "skip" in block.markers:
            return Outcome()
        from certified_circuits.api import Certificate
        from certified_circuits.core.planning import PlanWarning

        before = {id(v) for v in self.namespace.values() if isinstance(v, Certificate)}
        code = compile("\n" * block.line + block.code, str(block.path), "exec")  # tracebacks: the file's lines
        out, cwd, path, modules = io.StringIO(), os.getcwd(), list(sys.path), set(sys.modules)
        outcome = Outcome()
        try:
            os.chdir(self.workdir)
            sys.path.insert(0, str(self.workdir))
            with contextlib.redirect_stdout(out), warnings.catch_warnings():
                warnings.simplefilter("error", PlanWarning)
                exec(code, self.namespace)
        except Exception as exc:  # reported by the block's test
            outcome.error = exc
        finally:
            os.chdir(cwd)
            sys.path[:] = path
            for name in set(sys.modules) - modules:  # the example's own modules (my_scorers) go with it
                if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(self.workdir)):
                    del sys.modules[name]
        outcome.stdout = out.getvalue()
        outcome.certificates = [
            v for v in self.namespace.values() if isinstance(v, Certificate) and id(v) not in before
        ]
        return outcome


@pytest.fixture(scope="module")
def readers(tmp_path_factory: pytest.TempPathFactory):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a fixed order of CPU reductions: the printed counts are reproducible
    made: dict[Path, Reader] = {}

    def reader(path: Path) -> Reader:
        if path not in made:
            made[path] = Reader(path, tmp_path_factory.mktemp(path.stem))
        return made[path]

    yield reader
    torch.set_num_threads(threads)


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
TOLERANCE = re.compile(r"^tolerance (\d+(?:\.\d+)?)%$")


def _same_text(actual: str, expected: str, tolerance: str | None = None) -> bool:
    """Equal line by line (trailing blanks ignored); with ``tolerance`` ("tolerance 10%"), the text between
    numbers is equal and each number is within that relative tolerance (integers: at least 1) of the shown one."""
    strip = lambda text: [line.rstrip() for line in text.strip("\n").splitlines()]  # noqa: E731
    if tolerance is None:
        return strip(actual) == strip(expected)
    found = TOLERANCE.match(tolerance)
    assert found, f"write <!-- docs-test: output (tolerance N%) -->, not {tolerance!r}"
    relative = float(found[1]) / 100
    a, e = "\n".join(strip(actual)), "\n".join(strip(expected))
    if NUMBER.sub("#", a) != NUMBER.sub("#", e):
        return False
    for got, shown in zip(NUMBER.findall(a), NUMBER.findall(e)):
        slack = relative * abs(float(shown))
        if "." not in shown and "e" not in shown:
            slack = max(1.0, slack)
        if abs(float(got) - float(shown)) > slack:
            return False
    return True


# ------------------------------------------------------------------------------------------------- tests


def test_blocks_are_found():
    """The parser sees the examples this test exists for (a broken parser would pass everything)."""
    names = {block.name for block in PYTHON}
    assert sum(name.startswith("README.md:") for name in names) >= 2
    assert sum(name.startswith("docs/custom_vision.md:") for name in names) >= 3
    assert CLI, "the README's `bin/certified-circuits plan` example"


def test_markers_are_well_formed():
    """Every docs-test comment parses, every skip says why, and each marker sits on a block it fits."""
    for path in DOCS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "docs-test" in line:
                found = MARKER.match(line)
                assert found and found["key"] in KEYS, f"{path.name}:{number}: malformed docs-test marker {line!r}"
    for block in BLOCKS:
        markers = block.markers
        if "skip" in markers:
            assert block.lang == "python", f"{block.name}: only python blocks run, so only they can be skipped"
            assert markers["skip"], f"{block.name}: a skipped block needs a reason: <!-- docs-test: skip (why) -->"
        if "certifies" in markers:
            sides = [s.strip() for s in (markers["certifies"] or "").split(",")]
            assert block.lang == "python" and sides and set(sides) <= set(SIDES), (
                f"{block.name}: write <!-- docs-test: certifies (in), (out) or (in, out) --> above a python block"
            )
        if "output" in markers:
            previous = [b for b in BLOCKS if b.path == block.path and b.line < block.line]
            assert previous and previous[-1].lang == "python", f"{block.name}: an output block follows a python block"
        if "cli" in markers:
            assert block.code.startswith("$ bin/certified-circuits "), f"{block.name}: a cli block starts with the command"


def test_tolerant_output_compares_words_exactly_and_numbers_within_the_tolerance():
    shown = "certified in:  [  8  33 116] of 1440 | p_empty 0.00295"
    assert _same_text("certified in:  [  8  33 116] of 1440 | p_empty 0.00295", shown)
    assert not _same_text("certified in:  [  9  33 116] of 1440 | p_empty 0.00295", shown)
    assert _same_text("certified in:  [  9  32 120] of 1440 | p_empty 0.00290", shown, "tolerance 5%")
    assert not _same_text("certified in:  [ 10  33 116] of 1440 | p_empty 0.00295", shown, "tolerance 5%")  # 8 +- 1
    assert not _same_text("certified in:  [  8  33 130] of 1440 | p_empty 0.00295", shown, "tolerance 5%")
    assert not _same_text("certified out: [  8  33 116] of 1440 | p_empty 0.00295", shown, "tolerance 5%")


@pytest.mark.parametrize("block", PYTHON, ids=[block.name for block in PYTHON])
def test_python_block(block: Block, readers):
    """The block runs after the file's earlier blocks; it prints what the text shows; it certifies what
    the text says it certifies, and any certificate it makes certifies something."""
    if "skip" in block.markers:
        pytest.skip(f"{block.name}: {block.markers['skip']}")
    outcome = readers(block.path).run_until(block)
    if outcome.error is not None:
        raise outcome.error
    if block.expected_output is not None:
        assert _same_text(outcome.stdout, block.expected_output, block.output_tolerance), (
            f"{block.name} printed\n{outcome.stdout}\nbut the text after it shows\n{block.expected_output}"
        )
    for certificate in outcome.certificates:
        assert (certificate.decision != -1).any(), f"{block.name}: a certificate that certifies nothing"
    if "certifies" in block.markers:
        assert outcome.certificates, f"{block.name} says it certifies, but made no Certificate"
        for side in (s.strip() for s in block.markers["certifies"].split(",")):
            count = sum(int((c.decision == SIDES[side]).sum()) for c in outcome.certificates)
            assert count > 0, f"{block.name}: the text says it certifies {side.upper()}, but none is"


@pytest.mark.parametrize("block", CLI, ids=[block.name for block in CLI])
def test_cli_block(block: Block, tmp_path: Path):
    """A `$ bin/certified-circuits ...` block prints exactly the text below its command."""
    command, _, expected = block.code.partition("\n")
    args = shlex.split(command.removeprefix("$ bin/certified-circuits "))
    assert args[0] == "plan", f"{block.name}: only side-effect-free commands are run from the docs"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "certified_circuits.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert _same_text(done.stdout, expected), f"{block.name}: the command prints\n{done.stdout}"


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_doc_page_is_in_the_index_and_every_link_resolves():
    """docs/index.md lists every page of docs/ (one line each), and every relative Markdown link of README.md
    and docs/ names a file that exists (moving text between pages must not leave a dead link)."""
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    listed = set(LINK.findall(index))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")} - {"index.md"}
    assert not pages - listed, f"docs/index.md does not list {sorted(pages - listed)}"
    for path in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        for target in LINK.findall(path.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            assert (path.parent / target.split("#")[0]).exists(), f"{path.relative_to(ROOT)}: dead link {target}"
