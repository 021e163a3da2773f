"""The docs build needs only the `docs` extra: the API reference's griffe extension
(docs/_ext/lazy_exports.py) finds the lazily imported public names from the package's source,
without importing them (they need torch, transformers, TRL or Ray). CI also builds the site
in a venv with only the docs extra (.ci/run)."""

from __future__ import annotations

import ast
import importlib
import importlib.util

import pytest

import fastcollate
from tests.support.repository import ROOT

EXTENSION = ROOT / "docs" / "_ext" / "lazy_exports.py"
HEAVY = ("torch", "transformers", "trl", "ray", "datasets")


def load_extension():
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location("lazy_exports", EXTENSION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_lazy_names_are_read_from_the_source_and_point_at_their_objects():
    table = load_extension().lazy_exports(
        (ROOT / "python" / "fastcollate" / "__init__.py").read_text("utf-8"), "fastcollate"
    )
    assert set(table) == set(fastcollate._LAZY)
    for name, target in table.items():
        module, _, attribute = target.rpartition(".")
        assert getattr(importlib.import_module(module), attribute) is getattr(fastcollate, name)


def test_the_extension_imports_nothing_of_fastcollate_or_its_extras():
    imported = set()
    for node in ast.walk(ast.parse(EXTENSION.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= {"__future__", "ast", "typing", "griffe"}
    assert "import_module" not in EXTENSION.read_text("utf-8")


def test_the_docs_extra_has_what_the_build_needs():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    docs = " ".join(extras["docs"])
    assert "mkdocs-material" in docs and "mkdocstrings[python]" in docs
    assert not any(heavy in docs for heavy in HEAVY)
