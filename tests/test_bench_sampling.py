"""Smoke tests of `python -m fastcollate bench --sampling` (no timings are asserted)."""

from __future__ import annotations

import numpy as np
import pytest

import fastcollate
from fastcollate import _bench_sampling
from fastcollate.__main__ import main


def test_padded_share_counts_padding():
    lengths = np.array([2, 4, 1, 1])
    # [0, 1] pads to 2 x 4, [2, 3] to 2 x 1: 8 real tokens of 10.
    assert _bench_sampling.padded_share(lengths, [[0, 1], [2, 3]]) == 0.8


def test_distributions_are_deterministic_and_bounded():
    for draw, (low, high) in zip(
        _bench_sampling.DISTRIBUTIONS.values(), [(4, 512), (16, 4096)], strict=True
    ):
        a = draw(np.random.default_rng(0), 5000)
        assert np.array_equal(a, draw(np.random.default_rng(0), 5000))
        assert a.min() >= low and a.max() <= high


RELEASE_ONLY = pytest.mark.skipif(
    fastcollate.build_profile != "release", reason="the bench needs a release build"
)


@RELEASE_ONLY
def test_command_prints_every_sampler(capsys, tmp_path):
    plot = tmp_path / "sampling.png"
    args = ["bench", "--sampling", "--rows", "3000", "--batch-size", "4", "--world-size", "2"]
    try:
        import matplotlib  # noqa: F401

        args += ["--plot", str(plot)]
    except ImportError:
        plot = None
    assert main(args) == 0
    out = capsys.readouterr().out
    for distribution in _bench_sampling.DISTRIBUTIONS:
        for sampler in _bench_sampling.SAMPLERS:
            assert any(
                line.startswith(distribution) and sampler in line for line in out.splitlines()
            ), (distribution, sampler)
    if plot is not None:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_debug_build_is_refused(monkeypatch, capsys):
    monkeypatch.setattr(fastcollate, "build_profile", "debug")
    assert main(["bench", "--sampling"]) == 1
    assert "debug build" in capsys.readouterr().err
