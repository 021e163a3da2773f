"""Every ```python block of README.md runs as printed (hub model names pointed at the bundled
test model, see code_blocks.py)."""

from __future__ import annotations

import pytest

from tests.support.code_blocks import ROOT, python_blocks, redirect_hub_names, run_blocks

README = ROOT / "README.md"


def test_the_readme_has_a_quick_start():
    assert len(python_blocks(README)) >= 1


def test_the_readme_is_short():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


@pytest.mark.parametrize("block", python_blocks(README), ids=lambda block: f"line{block[0]}")
def test_python_block_runs_as_printed(block, model_path, tmp_path, monkeypatch):
    redirect_hub_names(monkeypatch, model_path)
    monkeypatch.chdir(tmp_path)  # examples may write (a Trainer's output folder)
    run_blocks(README, [block])
