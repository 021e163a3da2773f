"""Every published benchmark figure comes from a committed results file: the generated regions
of README.md and docs/ equal what benches/render_figures.py makes from benches/results/, and
no speed-up or timing stands outside those regions."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from tests.support.repository import ROOT

SCRIPT = ROOT / "benches" / "render_figures.py"
# A speed-up ("410×", "1.5x") or a time ("0.9 ms", "12 µs", "4.1 s"); dimensions such as
# "2 × batch" (a space before the sign) are not figures.
FIGURE = re.compile(r"\d(?:×|x\b)|\d\s?(?:ms|µs|ns|s)\b")
FENCE = re.compile(r"^```.*?^```$", re.DOTALL | re.MULTILINE)


def load_script():
    spec = importlib.util.spec_from_file_location("render_figures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


render_figures = load_script()


def figures_outside_regions(text: str) -> list[str]:
    text = render_figures.REGION.sub("", text)
    text = FENCE.sub("", text)
    return [
        line.strip()
        for line in text.splitlines()
        if FIGURE.search(line) and not line.lstrip().startswith("<!--")
    ]


@pytest.mark.parametrize("page", render_figures.PAGES, ids=lambda p: p.name)
def test_generated_figures_match_the_results_files(page):
    text = page.read_text("utf-8")
    assert render_figures.render_page(text) == text, (
        f"{page.name}: figures differ from benches/results/; run python benches/render_figures.py"
    )


@pytest.mark.parametrize(
    "page", [p for p in render_figures.PAGES if p.name != "changelog.md"], ids=lambda p: p.name
)
def test_no_figure_outside_a_generated_region(page):
    # docs/changelog.md includes CHANGELOG.md, whose dated entries keep the figures of their time.
    assert figures_outside_regions(page.read_text("utf-8")) == []


def test_the_headline_pages_use_generated_figures():
    for page in ("README.md", "docs/index.md"):
        assert "<!-- figures: headline -->" in (ROOT / page).read_text("utf-8")
    assert "<!-- figures: with-padding -->" in (ROOT / "README.md").read_text("utf-8")


def test_every_results_file_records_its_command_and_environment():
    for name, command in render_figures.RESULTS.items():
        record = json.loads((render_figures.RESULTS_DIR / name).read_text("utf-8"))
        env = record["environment"]
        for key in ("command", "date", "cpu", "python", "numpy", "torch", "transformers"):
            assert env.get(key), f"{name}: no {key}"
        assert env["fastcollate"] and env["build_profile"] == "release", name
        # The command that wrote it is the one the script documents.
        assert env["command"] == command, name


def test_a_changed_number_is_caught():
    page = ROOT / "README.md"
    text = page.read_text("utf-8")
    match = re.search(r"<!-- figures: with-padding -->(.*?)<!-- /figures -->", text, re.DOTALL)
    assert match is not None
    numbers = re.findall(r"\d+(?:\.\d+)?×", match.group(1))
    assert numbers
    tampered = text.replace(numbers[0], "9" + numbers[0], 1)
    assert render_figures.render_page(tampered) != tampered
    assert render_figures.render_page(tampered) == text


def test_a_figure_outside_the_regions_is_caught():
    assert figures_outside_regions("padded 160–410× faster") == ["padded 160–410× faster"]
    assert figures_outside_regions("took 0.05 ms here") == ["took 0.05 ms here"]
    assert figures_outside_regions("| 200,000 | 4.10 s |") == ["| 200,000 | 4.10 s |"]
    assert figures_outside_regions("`rank × num_workers`, 2 × batch rows") == []
    assert figures_outside_regions("a <!-- figures: headline -->1–2×<!-- /figures --> b") == []
    assert figures_outside_regions("```bash\nbench  # 3x faster\n```") == []


def test_an_unknown_region_is_an_error():
    with pytest.raises(KeyError, match="no-such"):
        render_figures.render_page("<!-- figures: no-such --><!-- /figures -->")
