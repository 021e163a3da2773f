"""The docs site: every ```python block of each docs/ page runs, in order, in one namespace per
page (a page's later blocks use what its first ones built), run offline with TOKENIZER / MODEL
naming the bundled test model. A block that cannot run alone is marked
`<!-- no-run: reason -->`."""

from __future__ import annotations

import pytest

from tests.support.code_blocks import ROOT, offline_as_documented, python_blocks, run_blocks

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


def test_the_docs_have_pages_with_code():
    assert sum(len(python_blocks(page)) for page in PAGES) >= 10


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(DOCS)))
def test_every_skipped_block_says_why(page):
    for line, _, reason in python_blocks(page):
        assert reason != "", f"{page.name}, block at line {line}: no-run needs a reason"


@pytest.mark.parametrize(
    "page",
    [page for page in PAGES if python_blocks(page)],
    ids=lambda page: str(page.relative_to(DOCS)),
)
def test_python_blocks_run_as_printed(page, model_path, tmp_path, monkeypatch):
    offline_as_documented(monkeypatch, model_path)
    monkeypatch.chdir(tmp_path)  # blocks may write (a Trainer's output folder)
    run_blocks(page, python_blocks(page))


def test_every_public_name_is_in_the_api_reference():
    import fastcollate

    reference = (DOCS / "reference.md").read_text(encoding="utf-8")
    missing = [
        name
        for name in fastcollate.__all__
        if name not in ("__version__", "build_profile")
        and f"::: fastcollate.{name}\n" not in reference
    ]
    assert not missing
