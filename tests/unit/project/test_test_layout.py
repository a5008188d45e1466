"""The unit tests mirror the package (issue 52, item 8; docs/testing.md, "Where a new test goes").

Every unit test lives in a room, ``tests/unit/<room>/``, whose name is one of the sub-packages of
``certified_circuits`` (``core``, ``storage``, ``analysis``, ...) or ``project`` (the repository as a whole and the
package's top-level modules); nothing but ``conftest.py`` and ``__init__.py`` stays directly in ``tests/unit/``.
``tests/unit/data/`` holds the fixture files that tests of several rooms read; it is not a room.

:data:`WAITING` names the test files that other work kept out of this pass, each with why; a file leaves the list when
it moves, and the list is meant to end empty.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.paths import ROOT

UNIT = ROOT / "tests" / "unit"
PACKAGE = ROOT / "src" / "certified_circuits"
#: the one room that is no sub-package of certified_circuits
PROJECT_ROOM = "project"
#: folders directly in tests/unit/ that are not rooms: the fixture files several rooms read
NOT_ROOMS = {"data"}
#: files that may stay directly in tests/unit/
ALLOWED_FILES = {"conftest.py", "__init__.py"}
#: test files still directly in tests/unit/, each with why it waits (empty: every test is in its room)
WAITING: dict[str, str] = {}


def sub_packages() -> set[str]:
    """The folders of src/certified_circuits that are packages (hold an ``__init__.py``)."""
    return {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}


def foreign_rooms(unit: Path, packages: set[str]) -> list[str]:
    """The folders directly in ``unit`` that are neither a room (a name in ``packages`` or ``project``) nor a fixture
    folder of :data:`NOT_ROOMS`, sorted."""
    rooms = {p.name for p in unit.iterdir() if p.is_dir() and p.name != "__pycache__"} - NOT_ROOMS
    return sorted(rooms - packages - {PROJECT_ROOM})


def loose_files(unit: Path) -> list[str]:
    """The files directly in ``unit`` other than :data:`ALLOWED_FILES` and the :data:`WAITING` ones, sorted."""
    return sorted({p.name for p in unit.iterdir() if p.is_file()} - ALLOWED_FILES - set(WAITING))


def test_every_room_is_a_sub_package_or_the_project() -> None:
    foreign = foreign_rooms(UNIT, sub_packages())
    assert not foreign, (f"tests/unit/ folders {foreign} are no sub-package of certified_circuits; put their tests in "
                         f"one of {sorted(sub_packages() | {PROJECT_ROOM})}")


def test_no_test_file_is_left_directly_in_tests_unit() -> None:
    loose = loose_files(UNIT)
    assert not loose, (f"{loose} directly in tests/unit/: move each into the room of the module it exercises, "
                       "tests/unit/<room>/test_<module>.py (docs/testing.md, 'Where a new test goes')")


def test_every_waiting_file_is_still_waiting() -> None:
    """A file that has moved leaves :data:`WAITING`, so the list says exactly what is left to move."""
    moved = sorted(name for name in WAITING if not (UNIT / name).is_file())
    assert not moved, f"{moved} no longer in tests/unit/: remove them from WAITING"


def test_the_checks_find_a_loose_file_and_a_folder_that_is_no_room(tmp_path: Path) -> None:
    for name in ("core", "project", "data", "helpers", "__pycache__"):
        (tmp_path / name).mkdir()
    for name in ("conftest.py", "__init__.py", "test_waiting.py", "test_x.py", "notes.md"):
        (tmp_path / name).write_text("")
    assert foreign_rooms(tmp_path, {"core", "storage"}) == ["helpers"]
    assert loose_files(tmp_path) == ["notes.md", "test_waiting.py", "test_x.py"]  # nothing waits: every test is in a room


def test_the_rooms_include_the_package_layers() -> None:
    """The check reads the package itself: its layers are the rooms (docs/architecture.md, section 1)."""
    assert {"core", "storage", "analysis", "reports", "vision", "language", "pipeline", "cli"} <= sub_packages()
