"""Every file of this repository that the README, the CHANGELOG or a docs page names
(`tests/…py`, `benches/…`, `examples/…`) exists: a moved or renamed file leaves no stale
reference behind."""

from __future__ import annotations

import re

import pytest

from tests.support.repository import ROOT

PAGES = sorted(
    [ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")],
    key=lambda path: path.as_posix(),
)
# A path starting at one of these folders; not part of a longer path (another repository's
# `transformers/tests/...`) or a word. Trailing sentence punctuation is not part of it.
NAMED = re.compile(r"(?<![\w/.-])((?:tests|benches|examples)/[\w./-]*[\w/])(<?)")
# The note benches/render_figures.py writes in a figures region whose results file has not been
# written yet: the results file it names is the output of the command it gives, not a reference.
PENDING = re.compile(r"^_Pending: .*$", re.MULTILINE)
RESULTS = "benches/results/"


def named_paths(text: str) -> set[str]:
    found = set()
    outside_notes = {path for path, _ in NAMED.findall(PENDING.sub("", text))}
    for path, placeholder in NAMED.findall(text):
        if placeholder:
            continue  # a name pattern such as `benches/results/gpu_<device>.json`
        if path.startswith(RESULTS) and path not in outside_notes:
            continue  # named only as what a pending note's command writes
        if "*" in path or path.endswith("/…") or path.endswith("/..."):
            continue
        if path.startswith("tests/") and not (path.endswith(".py") or path.endswith("/")):
            continue  # a test id, a pattern or a prose mention, not a file
        found.add(path)
    return found


def test_the_pattern_finds_paths_and_leaves_other_repositories_out():
    text = (
        "`tests/collators/test_family.py`, benches/results/trl.json. Not transformers/tests/x.py"
        " nor the pattern benches/results/gpu_<device>.json"
    )
    assert named_paths(text) == {"tests/collators/test_family.py", "benches/results/trl.json"}


def test_a_results_file_a_pending_note_names_is_what_its_command_writes():
    note = ("_Pending: `benches/results/x.json` has not been written yet; `python a --json "
            "benches/results/x.json` writes it, then `python benches/render_figures.py`._")
    assert named_paths(note) == {"benches/render_figures.py"}
    # Named outside the note too: a reference again.
    assert named_paths(note + "\nSee benches/results/x.json.") == {
        "benches/render_figures.py", "benches/results/x.json"}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_named_path_exists(page):
    text = page.read_text(encoding="utf-8")
    missing = sorted(path for path in named_paths(text) if not (ROOT / path).exists())
    assert missing == [], f"{page.relative_to(ROOT)} names files that do not exist: {missing}"
