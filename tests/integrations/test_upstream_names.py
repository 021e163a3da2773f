"""Every private transformers / TRL / accelerate name fastcollate relies on
(`fastcollate._internal.upstream.PRIVATE_NAMES`) exists in the installed libraries: an upstream
rename fails the one test named after the attribute, with what uses it in the message. And every
private method fastcollate's subclasses override is in that list (an override of a renamed
method would be silently uncalled)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from fastcollate._internal.patching import original
from fastcollate._internal.upstream import PRIVATE_NAMES, PrivateName

# Run with the parity tests (on every CPython, and by the workflow's newest-upstream job): an
# upstream rename shows here first, named.
pytestmark = pytest.mark.parity


def _owner(entry: PrivateName) -> Any:
    """The library's own class (not fastcollate's, were it patched in)."""
    module, _, name = entry.owner.rpartition(".")
    try:
        return original(module, name)
    except (ImportError, AttributeError) as err:
        pytest.fail(f"{entry.owner} (the owner of {entry.name}, which {entry.used_by}) is "
                    f"gone from the installed library: {err}")


def _has_instance_attribute(entry: PrivateName, bert_tokenizer: Any) -> bool:
    owner = entry.owner.rpartition(".")[2]
    if owner == "BatchEncoding":
        return entry.name in vars(_owner(entry)())
    if owner == "TokenizersBackend":
        assert isinstance(bert_tokenizer, _owner(entry))
        return entry.name in vars(bert_tokenizer)
    if owner == "Accelerator":
        # In a process of its own: an Accelerator sets process-wide state other tests share.
        code = ("import sys; from accelerate import Accelerator; "
                f"sys.exit(0 if hasattr(Accelerator(), {entry.name!r}) else 3)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode in (0, 3), done.stderr
        return done.returncode == 0
    raise AssertionError(f"no instance of {entry.owner} to look for {entry.name} on: add one")


def _library(entry: PrivateName) -> str:
    return entry.owner.split(".")[0]


@pytest.mark.parametrize(
    "entry", PRIVATE_NAMES, ids=[f"{e.owner.rpartition('.')[2]}.{e.name}" for e in PRIVATE_NAMES]
)
def test_private_name_exists_upstream(entry: PrivateName, bert_tokenizer: Any) -> None:
    pytest.importorskip(_library(entry))
    if entry.on_instance:
        found = _has_instance_attribute(entry, bert_tokenizer)
    else:
        found = hasattr(_owner(entry), entry.name)
    where = "an instance of " if entry.on_instance else ""
    assert found, (
        f"{where}{entry.owner} has no attribute {entry.name!r} in the installed "
        f"{_library(entry)}, but fastcollate relies on it: {entry.used_by}. Upstream renamed "
        "or removed it: follow the change there and update fastcollate/_internal/upstream.py"
    )


def _overriding_classes() -> list[tuple[type, type]]:
    """(fastcollate class, the upstream class whose methods it overrides)."""
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    import transformers

    from fastcollate.arrow.trainer_datasets import ArrowDataLoaderMixin
    from fastcollate.collators.language_modeling import DataCollatorForLanguageModeling
    from fastcollate.integrations.trainer import ArrowTrainerMixin

    trainer = original("transformers.trainer", "Trainer")
    collator = original("transformers.data.data_collator", "DataCollatorForLanguageModeling")
    assert trainer is transformers.trainer.Trainer or issubclass(transformers.Trainer, trainer)
    return [
        (ArrowTrainerMixin, trainer),
        (ArrowDataLoaderMixin, trainer),
        (DataCollatorForLanguageModeling, collator),
    ]


def test_every_overridden_private_method_is_listed() -> None:
    unlisted = []
    for ours, theirs in _overriding_classes():
        listed = {e.name for e in PRIVATE_NAMES
                  if e.owner == f"{theirs.__module__}.{theirs.__qualname__}"}
        for name in vars(ours):
            if name.startswith("_") and not name.startswith("__") and hasattr(theirs, name):
                if name not in listed:
                    unlisted.append(f"{ours.__qualname__}.{name} overrides {theirs.__qualname__}'s")
    assert not unlisted, (
        "private upstream methods overridden but not listed in "
        "fastcollate/_internal/upstream.py's PRIVATE_NAMES:\n" + "\n".join(unlisted)
    )
