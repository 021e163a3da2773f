"""`patch_transformers()` and `patch_trl()` warn once per process (`UntestedVersionWarning`)
when the installed transformers / TRL is outside the tested releases, and not at all inside
them."""

from __future__ import annotations

import warnings

import pytest

import fastcollate
from fastcollate._internal import versions

pytestmark = pytest.mark.parity


@pytest.fixture
def fresh(monkeypatch):
    """No warning given yet, and the installed versions as the test says."""
    monkeypatch.setattr(versions, "_warned", set())
    installed: dict[str, str] = {}
    real = versions.installed_version
    monkeypatch.setattr(versions, "installed_version",
                        lambda name: installed.get(name) or real(name))
    yield installed
    fastcollate.unpatch_transformers()


def given(call) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [w for w in caught if issubclass(w.category, fastcollate.UntestedVersionWarning)]


def test_warns_once_outside_the_tested_range(fresh):
    fresh["transformers"] = "5.99.0"
    first = given(lambda: fastcollate.patch_transformers().undo())
    assert len(first) == 1
    message = str(first[0].message)
    assert "transformers 5.99.0" in message and "5.0 to 5.25" in message
    assert first[0].filename == __file__  # pointed at the caller's line
    assert given(lambda: fastcollate.patch_transformers().undo()) == []


@pytest.mark.parametrize("version", ["5.0.0", "5.20.2", "5.24.0", "5.25.0", "5.25.2"])
def test_silent_inside_the_tested_range(fresh, version):
    fresh["transformers"] = version
    assert given(lambda: fastcollate.patch_transformers().undo()) == []


@pytest.mark.parametrize("version", ["4.57.1", "5.26.0", "5.26.0.dev0", "6.0.0"])
def test_every_release_outside_warns(fresh, version):
    fresh["transformers"] = version
    assert len(given(lambda: fastcollate.patch_transformers().undo())) == 1


def test_patch_trl_warns_for_trl(fresh):
    pytest.importorskip("trl", reason="TRL needs Python >= 3.11 (the trl extra)")
    fresh["trl"] = "1.17.0"
    caught = given(lambda: fastcollate.patch_trl().undo())
    assert len(caught) == 1 and "trl 1.17.0" in str(caught[0].message)
    assert given(lambda: fastcollate.patch_trl().undo()) == []


def test_the_installed_releases_are_tested(fresh):
    """What the README's commands install today (the pins of .ci/constraints.txt, the newest
    releases) is inside the range: the quick start gives no UntestedVersionWarning."""
    for name in versions.TESTED:
        version = versions.installed_version(name)
        assert version is None or versions.is_tested(name, version), (name, version)
    assert given(fastcollate.patch_transformers) == []
    trl = pytest.importorskip("fastcollate.trl", exc_type=ImportError)
    assert given(lambda: trl.patch_trl().undo()) == []
