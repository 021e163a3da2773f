"""The collators the benchmark times: one `Case` each, with its rows, transformers' version,
fastcollate's and the baselines. A case whose fastcollate class does not exist is skipped."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import fastcollate

from .baselines import numpy_loop_baseline, pad_sequence_baseline, transformers_collator
from .checks import difference_but_masks
from .floor import FloorKeys, with_padding_keys
from .workload import (
    classification_rows,
    flattening_rows,
    language_modeling_rows,
    seq2seq_rows,
    token_classification_rows,
)


@dataclass
class Case:
    """One collator: how to make its rows, transformers' version and fastcollate's."""

    name: str
    make_rows: Callable[[np.random.Generator, int], list[dict[str, Any]]]
    reference: Callable[[Any], Callable]
    fast: Callable[[Any], Callable]
    # Hand-written baselines, for the collators where a hand-written loop is the alternative.
    baselines: dict[str, Callable[[Any], Callable]] = field(default_factory=dict)
    # Randomised collators: torch is seeded before every checked call, so equal seeds give equal
    # output. Timed calls are not seeded: torch.manual_seed costs ~0.13 ms, as much as a whole
    # natively masked batch.
    seeded: bool = False
    # Other fastcollate configurations, timed beside it (named "fastcollate ..."; not baselines)
    # and checked to give exactly transformers' output.
    variants: dict[str, Callable[[Any], Callable]] = field(default_factory=dict)
    # How fastcollate's output is checked against transformers' when it is not equal by design
    # (None when it is equal): returns what differs, or None.
    check: Callable[[dict, dict], str | None] | None = None
    # What that check compares, for the report (with `check` only).
    partial_check: str = ""
    # What the floor (bench/floor.py) pads for this collator, from the tokenizer; None where no
    # floor is defined (the report shows "-").
    floor: Callable[[Any], FloorKeys] | None = None

    @property
    def available(self) -> bool:
        return hasattr(fastcollate, self.name)


CASES: list[Case] = [
    Case(
        "DataCollatorWithPadding",
        classification_rows,
        lambda tok: transformers_collator("DataCollatorWithPadding")(tok),
        lambda tok: fastcollate.DataCollatorWithPadding(tok),
        baselines={"pad_sequence": pad_sequence_baseline, "numpy loop": numpy_loop_baseline},
        floor=with_padding_keys,
    ),
    Case(
        "DataCollatorForTokenClassification",
        token_classification_rows,
        lambda tok: transformers_collator("DataCollatorForTokenClassification")(tok),
        lambda tok: fastcollate.DataCollatorForTokenClassification(tok),
    ),
    Case(
        "DataCollatorForSeq2Seq",
        seq2seq_rows,
        lambda tok: transformers_collator("DataCollatorForSeq2Seq")(tok),
        lambda tok: fastcollate.DataCollatorForSeq2Seq(tok),
    ),
    Case(
        "DataCollatorWithFlattening",
        flattening_rows,
        lambda tok: transformers_collator("DataCollatorWithFlattening")(),
        lambda tok: fastcollate.DataCollatorWithFlattening(),
    ),
    Case(
        "DataCollatorForLanguageModeling",
        language_modeling_rows,
        lambda tok: transformers_collator("DataCollatorForLanguageModeling")(tok, mlm=True),
        lambda tok: fastcollate.DataCollatorForLanguageModeling(tok, mlm=True),
        seeded=True,
        variants={
            'fastcollate mask_rng="torch"': lambda tok: fastcollate.DataCollatorForLanguageModeling(
                tok, mlm=True, mask_rng="torch"
            )
        },
        check=difference_but_masks,
        partial_check=(
            "the masks are drawn by another generator, so every key but input_ids and labels, "
            "their types, dtypes and shapes, and the ids before masking are checked equal"
        ),
    ),
]


def short_name(case: str) -> str:
    """The name the table prints: the collator without its `DataCollator` prefix."""
    return case.removeprefix("DataCollator")


def resolve_cases(names: Sequence[str]) -> list[str]:
    """Collator names as `timing.run` takes them, from full or short names (`WithPadding`), in
    any letter case. Unknown names raise ValueError listing the valid ones."""
    by_name = {}
    for case in CASES:
        by_name[case.name.lower()] = case.name
        by_name[short_name(case.name).lower()] = case.name
    unknown = [n for n in names if n.lower() not in by_name]
    if unknown:
        valid = ", ".join(short_name(c.name) for c in CASES)
        raise ValueError(f"unknown case(s) {', '.join(unknown)}; choose from {valid}")
    resolved = [by_name[n.lower()] for n in names]
    return list(dict.fromkeys(resolved))
