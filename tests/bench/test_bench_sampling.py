"""Smoke tests of `python -m fastcollate bench --sampling` (no timings are asserted)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fastcollate
from fastcollate.__main__ import main
from fastcollate.bench import sampling, workload


def test_padded_share_counts_padding():
    lengths = np.array([2, 4, 1, 1])
    # [0, 1] pads to 2 x 4, [2, 3] to 2 x 1: 8 real tokens of 10.
    assert sampling.padded_share(lengths, [[0, 1], [2, 3]]) == 0.8


def test_distributions_are_deterministic_and_bounded():
    for draw, (low, high) in zip(
        workload.DISTRIBUTIONS.values(), [(4, 512), (16, 4096)], strict=True
    ):
        a = draw(np.random.default_rng(0), 5000)
        assert np.array_equal(a, draw(np.random.default_rng(0), 5000))
        assert a.min() >= low and a.max() <= high


def test_imdb_like_lengths_are_the_collator_rows_lengths():
    lengths = workload.imdb_like_lengths(np.random.default_rng(3), 50)
    rows = workload.flattening_rows(np.random.default_rng(3), 50)
    assert [len(r["input_ids"]) for r in rows] == lengths.tolist()


RELEASE_ONLY = pytest.mark.skipif(
    fastcollate.build_profile != "release", reason="the bench needs a release build"
)
# The smallest run that still exercises every sampler.
SMALL = ["bench", "--sampling", "--world-size", "2", "--batch-sizes", "4"]


def rows_of_table(out: str) -> dict[tuple[str, str], list[str]]:
    table = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) > 2 and cells[0] in workload.DISTRIBUTIONS:
            table[cells[0], cells[1]] = cells[2:]
    return table


@RELEASE_ONLY
def test_command_prints_every_sampler(capsys, tmp_path):
    plot = tmp_path / "sampling.png"
    args = [*SMALL, "--rows", "3000"]
    try:
        import matplotlib  # noqa: F401

        args += ["--plot", str(plot)]
    except ImportError:
        plot = None
    assert main(args) == 0
    table = rows_of_table(capsys.readouterr().out)
    assert set(table) == {(d, s) for d in workload.DISTRIBUTIONS for s in sampling.SAMPLERS}
    # random: 3000 rows in batches of 4.
    assert table["imdb-like", "random"][1] == "750"
    if plot is not None:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@RELEASE_ONLY
def test_json_records_every_figure_and_the_settings(tmp_path, capsys):
    path = tmp_path / "sampling.json"
    assert main([*SMALL, "--rows", "2000", "--no-transformers", "--json", str(path)]) == 0
    assert f"figures written to {path}" in capsys.readouterr().err
    data = json.loads(path.read_text())
    assert data["settings"] == {
        "seed": workload.SEED,
        "rows": 2000,
        "batch_size": 4,
        "grad_accum": 4,
        "world_size": 2,
        "max_tokens": 8192,
        "with_transformers": False,
    }
    assert data["environment"]["fastcollate"] == fastcollate.__version__
    seen = {(r["distribution"], r["sampler"]) for r in data["results"]}
    assert seen == {(d, s) for d in workload.DISTRIBUTIONS for s in sampling.SAMPLERS}
    for r in data["results"]:
        assert 0 < r["real_token_share"] <= 1 and r["batches"] > 0
        assert r["transformers_seconds"] is None  # --no-transformers


@RELEASE_ONLY
def test_quick_draws_fewer_rows(monkeypatch, capsys):
    monkeypatch.setattr(sampling, "QUICK_ROWS", 1000)
    assert sampling.QUICK_ROWS < sampling.SamplingSettings().rows
    assert main([*SMALL, "--quick", "--no-transformers"]) == 0
    out = capsys.readouterr().out
    assert "1,000 rows per distribution" in out
    assert rows_of_table(out)["chat-like", "random"][1] == "250"  # 1000 rows / 4


@RELEASE_ONLY
def test_the_old_batch_size_flag_warns_and_still_works(capsys):
    assert main([*SMALL[:-2], "--batch-size", "5", "--rows", "1000", "--no-transformers"]) == 0
    out, err = capsys.readouterr()
    assert "--batch-size is deprecated; use --batch-sizes 5" in err
    assert "batch_size=5," in out
    assert rows_of_table(out)["imdb-like", "random"][1] == "200"


def test_a_debug_build_is_refused(monkeypatch, capsys):
    monkeypatch.setattr(fastcollate, "build_profile", "debug")
    assert main(["bench", "--sampling"]) == 1
    assert "debug build" in capsys.readouterr().err
