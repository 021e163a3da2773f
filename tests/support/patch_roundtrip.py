"""Run by tests/integrations/test_patch.py in a fresh process (`python -m
tests.support.patch_roundtrip`): patch transformers, use every patched collator
and sampler through transformers' own names (as an unchanged script would), undo, use them all
again, and compare each output with what transformers' originals give. Exits non-zero (with
the failing name) on any difference or exception."""

from __future__ import annotations

import os
from collections.abc import Mapping

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import transformers.trainer_pt_utils as pt_utils  # noqa: E402

import fastcollate  # noqa: E402
from tests.support.bundled_model import model_dir  # noqa: E402
from tests.support.compare import assert_same_batch  # noqa: E402

TOKENIZER = transformers.AutoTokenizer.from_pretrained(model_dir())
COLLATORS = (
    "DataCollatorWithPadding",
    "DefaultDataCollator",
    "default_data_collator",
    "DataCollatorForTokenClassification",
    "DataCollatorForSeq2Seq",
    "DataCollatorWithFlattening",
    "DataCollatorForLanguageModeling",
    "DataCollatorForMultipleChoice",
)
SAMPLERS = ("LengthGroupedSampler", "DistributedLengthGroupedSampler", "get_length_grouped_indices")
# transformers' objects, taken before anything is patched.
ORIGINALS = {name: getattr(transformers, name) for name in COLLATORS} | {
    name: getattr(pt_utils, name) for name in SAMPLERS
}


def rows(seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for index in range(6):
        length = int(rng.integers(2, 9))
        ids = [101, *rng.integers(1000, 2000, length - 2).tolist(), 102]
        out.append({"input_ids": ids, "attention_mask": [1] * length, "label": index % 2})
    return out


def labelled(name: str) -> list[dict]:
    """Rows shaped for collator `name`."""
    base = rows(0)
    if name == "DataCollatorForTokenClassification":
        return [
            {"input_ids": r["input_ids"], "labels": [1] * len(r["input_ids"])} for r in base
        ]
    if name == "DataCollatorForSeq2Seq":
        return [{"input_ids": r["input_ids"], "labels": r["input_ids"][:3]} for r in base]
    if name in ("DataCollatorWithFlattening", "DataCollatorForLanguageModeling"):
        return [{"input_ids": r["input_ids"]} for r in base]
    if name == "DataCollatorForMultipleChoice":
        return [
            {"input_ids": [r["input_ids"], r["input_ids"][:2]], "label": r["label"]} for r in base
        ]
    if name in ("default_data_collator", "DefaultDataCollator"):
        return [{"input_ids": r["input_ids"][:2], "label": r["label"]} for r in base]
    return base


def collator(cls_or_fn, name: str, **options):
    if name == "default_data_collator":
        return cls_or_fn
    if name in ("DefaultDataCollator", "DataCollatorWithFlattening"):
        return cls_or_fn(**options)
    return cls_or_fn(TOKENIZER, **options)


def outputs(resolve) -> dict:
    """Every collator's and sampler's output, each object looked up with `resolve(name)`."""
    out = {}
    for name in COLLATORS:
        if name == "DataCollatorForLanguageModeling":
            # Causal labels are deterministic; masked-LM masks are drawn at random, so only the
            # call is checked there (below), not the values.
            out[name] = collator(resolve(name), name, mlm=False)(labelled(name))
            masked = collator(resolve(name), name, mlm=True)(labelled(name))
            out[name + "(mlm) keys"] = sorted(masked)
            out[name + "(mlm) shape"] = tuple(masked["input_ids"].shape)
        else:
            out[name] = collator(resolve(name), name)(labelled(name))
    lengths = [len(r["input_ids"]) for r in rows(1) * 5]
    generator = torch.Generator().manual_seed(3)
    out["LengthGroupedSampler"] = list(
        resolve("LengthGroupedSampler")(4, lengths=lengths, generator=generator)
    )
    distributed = resolve("DistributedLengthGroupedSampler")(
        4, num_replicas=2, rank=1, seed=5, lengths=lengths
    )
    out["DistributedLengthGroupedSampler"] = list(distributed)
    torch.manual_seed(7)
    out["get_length_grouped_indices"] = resolve("get_length_grouped_indices")(lengths, 4)
    return out


def same(ours, theirs, label: str) -> None:
    if isinstance(theirs, Mapping):
        assert_same_batch(ours, theirs)
    else:
        assert ours == theirs, f"{label}: {ours} != {theirs}"


def through_transformers(name: str):
    """The object an unchanged script gets: transformers' name, patched or not."""
    return getattr(pt_utils if name in SAMPLERS else transformers, name)


def check(phase: str, expected: dict, resolve) -> None:
    got = outputs(resolve)
    for key, theirs in expected.items():
        try:
            same(got[key], theirs, key)
        except AssertionError as err:
            raise SystemExit(f"{phase}: {key} differs from transformers': {err}") from None


def main() -> None:
    expected = outputs(ORIGINALS.__getitem__)
    with fastcollate.patch_transformers():
        fastcollate.patch_transformers()  # a second hold, kept after the with block
        for name in (*COLLATORS, *SAMPLERS):
            assert through_transformers(name) is getattr(fastcollate, name), name
        check("patched", expected, through_transformers)
    for name in (*COLLATORS, *SAMPLERS):
        assert through_transformers(name) is getattr(fastcollate, name), name
    fastcollate.unpatch_transformers()  # ends every hold
    fastcollate.unpatch_transformers()  # again: nothing left to undo
    for name in (*COLLATORS, *SAMPLERS):
        assert through_transformers(name) is ORIGINALS[name], name
    check("after undo, transformers' names", expected, through_transformers)
    check("after undo, fastcollate's own", expected, lambda name: getattr(fastcollate, name))
    print("ok")


if __name__ == "__main__":
    main()
