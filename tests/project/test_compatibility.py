"""The version contract: the table of tested releases in docs/compatibility.md is the range the
code warns outside of (`TESTED` in fastcollate/_internal/versions.py), and that range is what CI
installs: every release pinned in .ci/constraints.txt (and the workflow's oldest-transformers
pin) is inside it, and its ends are the oldest and newest of them."""

from __future__ import annotations

import re

from fastcollate._internal.versions import TESTED, series
from tests.support.repository import ROOT

MARKER = "<!-- tested-releases:"


def documented() -> dict[str, tuple[str, str]]:
    text = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    table = text[text.index(MARKER):].split("\n\n")[1]
    found = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        name = cells[0].strip("`")
        oldest, _, newest = cells[1].partition(" to ")
        found[name] = (oldest, newest or oldest)
    return found


def ci_releases() -> dict[str, list[str]]:
    """Each tested library's releases that CI installs: the constraints' pins (every marker)
    and the workflow's explicit `name==version` installs."""
    found: dict[str, list[str]] = {name: [] for name in TESTED}
    constraints = (ROOT / ".ci" / "constraints.txt").read_text(encoding="utf-8")
    for line in constraints.splitlines():
        match = re.match(r"([A-Za-z0-9_.-]+)==([^;\s]+)", line)
        if match and match[1] in found:
            found[match[1]].append(match[2])
    workflow = (ROOT / ".github" / "workflows" / "test.yml").read_text(encoding="utf-8")
    for name in TESTED:
        found[name] += re.findall(rf'"{re.escape(name)}==([0-9][^"]*)"', workflow)
    return found


def test_the_docs_table_is_the_code_range():
    assert documented() == TESTED


def test_the_range_is_what_ci_installs():
    for name, releases in ci_releases().items():
        assert releases, f"CI installs no pinned {name}"
        installed = sorted(series(release) for release in releases)
        oldest, newest = (series(bound) for bound in TESTED[name])
        assert (installed[0], installed[-1]) == (oldest, newest), (name, releases)


def test_the_oldest_transformers_job_is_counted():
    assert "5.0.0" in ci_releases()["transformers"]
