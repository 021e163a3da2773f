"""`patch_trl()` handles nest and race safely, as `patch_transformers()`'s do: an inner `with`
block or a second handle undoes only its own hold, and after threads patch and unpatch at once,
`unpatch_trl()` puts back every object TRL had (by identity) and TRL's `pad` works."""

from __future__ import annotations

import importlib
import sys

import pytest

pytest.importorskip("trl", reason="TRL needs Python >= 3.11 (the trl extra)")

import torch  # noqa: E402
import trl  # noqa: E402,F401 - imports the modules the patch replaces names in

import fastcollate  # noqa: E402
import fastcollate.trl  # noqa: E402
from fastcollate._internal import patching  # noqa: E402
from fastcollate.trl import patch as trl_patch  # noqa: E402
from tests.support.thread_races import race  # noqa: E402

pytestmark = pytest.mark.parity


def bindings() -> dict[tuple[str, str], object]:
    """What each place `patch_trl()` replaces holds now (a class's own attribute for a method)."""
    found = {}
    for places in trl_patch._TARGETS.values():
        for module_name, name in places:
            found[(module_name, name)] = patching._lookup(importlib.import_module(module_name),
                                                          name)
    return found


BEFORE = bindings()
TRL_PAD = BEFORE[("trl.trainer.utils", "pad")]


@pytest.fixture(autouse=True)
def unpatched_after():
    yield
    fastcollate.unpatch_trl()
    assert bindings() == BEFORE


def patched() -> bool:
    return sys.modules["trl.trainer.utils"].pad is fastcollate.trl.pad


def assert_restored():
    now = bindings()
    assert all(now[key] is value for key, value in BEFORE.items())
    pad = sys.modules["trl.trainer.utils"].pad
    assert pad is TRL_PAD
    out = pad([torch.tensor([1, 2, 3]), torch.tensor([4])], padding_value=0)
    assert out.tolist() == [[1, 2, 3], [4, 0, 0]]


def test_nested_and_two_handles():
    with fastcollate.patch_trl():
        with fastcollate.patch_trl():
            assert patched()
        assert patched()
    assert_restored()
    first, second = fastcollate.patch_trl(), fastcollate.patch_trl()
    second.undo()
    assert patched()
    first.undo()
    assert_restored()


def test_racing_patch_and_unpatch_leave_trl_whole():
    def step(index: int, round_index: int) -> None:
        handle = fastcollate.patch_trl()
        if (index + round_index) % 3 == 0:
            fastcollate.unpatch_trl()
        else:
            handle.undo()

    errors = race(step, threads=6, rounds=3)
    assert errors == []
    fastcollate.unpatch_trl()
    assert_restored()
