"""Every duration or speed figure in README.md and docs/ names where it comes from: a figure in a
generated region (`<!-- figures: ... -->`, written by benches/render_figures.py from a results
file whose note names it), or, elsewhere, a paragraph that names its results file under
benches/results/ or the command that measures it."""

from __future__ import annotations

import re

import pytest

from tests.support.repository import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REGION = re.compile(r"<!-- figures: [\w-]+ -->.*?<!-- /figures -->", re.DOTALL)
FENCE = re.compile(r"^ *```.*?^ *```$", re.DOTALL | re.MULTILINE)
# "29 seconds", "3½ minutes", "about a minute", "a few minutes", "12 ms", "4.1 s", "60×".
DURATION = re.compile(
    r"\b(?:\d[\d.,½]*|two|three|a few|several)\s+(?:seconds?|minutes?|hours?|mins?)\b"
    # "a second" is mostly the ordinal ("a second time"): a minute or an hour only.
    r"|\b(?:a|an|one)\s+(?:minute|hour)\b"
    r"|\d\s?(?:ms|µs|ns|s)\b|\d(?:×|x\b)",
    re.IGNORECASE,
)
# What names a source: a results file, or a command in backticks.
SOURCE = re.compile(
    r"benches/results/|`(?:python3?|bash|pip|cargo|maturin|mkdocs|torchrun) [^`]+`"
)


def unsourced(text: str) -> list[str]:
    text = FENCE.sub("", REGION.sub("", text))
    return [
        paragraph.strip()[:120]
        for paragraph in re.split(r"\n\s*\n", text)
        if DURATION.search(paragraph) and not SOURCE.search(paragraph)
    ]


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "changelog.md"],
                         ids=lambda p: p.name)
def test_every_duration_names_its_source(page):
    # docs/changelog.md includes CHANGELOG.md, whose dated entries keep the figures of their time.
    assert unsourced(page.read_text("utf-8")) == []


def test_the_check_catches_an_unsourced_duration():
    assert unsourced("The build takes about a minute.\n") != []
    assert unsourced("It took 4 minutes (`python benches/measure_setup.py`).\n") == []
    assert unsourced("<!-- figures: x -->29 seconds<!-- /figures --> here\n") == []


def test_the_readme_promises_no_pending_figure():
    # A figure not measured yet (the GPU run) stays on the docs' benchmarks page, with its command.
    assert "pending" not in (ROOT / "README.md").read_text("utf-8").lower()
