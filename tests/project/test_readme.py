"""Every ```python block of README.md runs as printed (offline, TOKENIZER / MODEL naming the
bundled test model, see code_blocks.py)."""

from __future__ import annotations

import pytest

from tests.support.code_blocks import ROOT, offline_as_documented, python_blocks, run_blocks

README = ROOT / "README.md"


def test_the_readme_has_a_quick_start():
    assert len(python_blocks(README)) >= 1


def test_the_readme_is_short():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


@pytest.mark.parametrize("block", python_blocks(README), ids=lambda block: f"line{block[0]}")
def test_python_block_runs_as_printed(block, model_path, tmp_path, monkeypatch):
    offline_as_documented(monkeypatch, model_path)
    monkeypatch.chdir(tmp_path)  # examples may write (a Trainer's output folder)
    run_blocks(README, [block])


def test_without_the_local_model_the_quick_start_fails_at_once(tmp_path):
    # The documented offline set-up less TOKENIZER: the Hub name is not in the (empty) cache and
    # HF_HUB_OFFLINE=1 makes that an immediate offline error, not a download retried.
    import os
    import subprocess
    import sys

    _, code, _ = python_blocks(README)[0]
    env = {k: v for k, v in os.environ.items() if k not in ("TOKENIZER", "MODEL")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "offline" in done.stderr.lower() or "HF_HUB_OFFLINE" in done.stderr, done.stderr[-2000:]


def test_every_block_that_loads_from_the_hub_reads_the_offline_variable():
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for line, code, reason in python_blocks(page):
            hub_name = "from_pretrained(\"" in code or "SentenceTransformer(\"" in code
            if reason is None and hub_name:
                raise AssertionError(f"{page.name}, block at line {line}: a Hub name without "
                                     "os.environ.get(\"TOKENIZER\" / \"MODEL\", ...)")
