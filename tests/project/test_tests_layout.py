"""The test suite's own layout: test files sit in folders that mirror the package, every folder
is a package (so `tests/trl/` and `tests/sentence_transformers/` cannot shadow the real `trl`
and `sentence_transformers`), and what test files share comes from `tests.support`, never
from another test file."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from tests.support.repository import ROOT

TESTS = ROOT / "tests"


def test_no_test_file_outside_a_folder():
    assert sorted(path.name for path in TESTS.glob("test_*.py")) == []


def test_every_folder_is_a_package():
    folders = {path.parent for path in TESTS.rglob("*.py")}
    missing = [f for f in folders if not (f / "__init__.py").exists()]
    assert sorted(str(f.relative_to(ROOT)) for f in missing) == []


def imported_modules(path):
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_test_files_import_only_tests_support():
    # A bare name (`import compare`, `from test_trainer import ...`) would need a tests folder
    # on sys.path; `tests.<area>.test_x` would make one test file depend on another.
    bare = {path.stem for path in TESTS.rglob("*.py")} - {"__init__"}
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for name in imported_modules(path):
            top = name.split(".")[0]
            if top in bare or (top == "tests" and not name.startswith("tests.support")):
                found.append(f"{path.relative_to(ROOT)}: {name}")
    assert found == []


@pytest.mark.parametrize("package", ["trl", "sentence_transformers"])
def test_test_folders_do_not_shadow_the_packages_they_test(package):
    spec = importlib.util.find_spec(package)
    if spec is None:
        pytest.skip(f"{package} is not installed")
    assert TESTS not in Path(spec.origin).resolve().parents
