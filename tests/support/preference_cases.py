"""Hypothesis strategies for TRL's preference collators: DPO, reward and KTO batches with the
options each collator takes."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tests.support.compare import to_format

PAD_IDS = [0, 2, 151643]
MULTIPLES = [None, 1, 3, 8]
MAX_LENGTHS = [None, 1, 2, 5, 9, 40]


def ids(min_size=0, max_size=10):
    return st.lists(st.integers(0, 2**40), min_size=min_size, max_size=max_size)


def logp():
    return st.one_of(st.floats(-50, 0, allow_nan=False), st.integers(-5, 0))


@st.composite
def dpo_case(draw):
    sequence = draw(st.sampled_from([list, tuple]))
    with_ref = draw(st.sampled_from(["none", "chosen", "both"]))
    rows = []
    for index in range(draw(st.integers(1, 6))):
        prompt = draw(ids(0, 8))
        # TRL's torch.tensor([]) would make the batch float32 (see the test below).
        chosen = draw(ids(0 if prompt or index else 1, 8))
        row = {
            "prompt_ids": sequence(prompt),
            "chosen_ids": sequence(chosen),
            "rejected_ids": sequence(draw(ids(0, 8))),
        }
        if with_ref != "none":
            row["ref_chosen_logps"] = draw(logp())
        if with_ref == "both":
            row["ref_rejected_logps"] = draw(logp())
        rows.append(row)
    options = {
        "pad_token_id": draw(st.sampled_from(PAD_IDS)),
        "max_length": draw(st.sampled_from(MAX_LENGTHS)),
        "truncation_mode": draw(st.sampled_from(["keep_start", "keep_end"])),
        "pad_to_multiple_of": draw(st.sampled_from(MULTIPLES)),
    }
    return rows, options


@st.composite
def reward_case(draw):
    fmt = draw(st.sampled_from(["list", "numpy", "torch", "mixed"]))
    dtype = draw(st.sampled_from([np.int64, np.int32]))
    margin = draw(st.booleans())
    rows = []
    for index in range(draw(st.integers(1, 6))):
        row = {}
        for key in ("chosen_ids", "rejected_ids"):
            values = draw(st.lists(st.integers(0, 30000), min_size=int(index == 0), max_size=9))
            row_fmt = draw(st.sampled_from(["list", "numpy", "torch"])) if fmt == "mixed" else fmt
            row[key] = to_format(values, row_fmt, dtype)
        if margin:
            row["margin"] = draw(logp())
        rows.append(row)
    options = {
        "pad_token_id": draw(st.sampled_from([0, 2, 30001])),
        "pad_to_multiple_of": draw(st.sampled_from(MULTIPLES)),
    }
    return rows, options


# --- KTO -------------------------------------------------------------------------------------
@st.composite
def kto_case(draw):
    sequence = draw(st.sampled_from([list, tuple]))
    kl = draw(st.booleans())
    refs = draw(st.sampled_from([(), ("ref_logps",), ("ref_logps", "ref_KL_logps")]))
    label = draw(st.sampled_from([st.booleans(), st.integers(0, 1)]))
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        row = {"prompt_ids": sequence(draw(ids(0, 8))), "completion_ids": sequence(draw(ids()))}
        if kl:
            row["KL_completion_ids"] = sequence(draw(ids()))
        for key in refs:
            row[key] = draw(logp())
        row["label"] = draw(label)
        rows.append(row)
    options = {
        "pad_token_id": draw(st.sampled_from(PAD_IDS)),
        "max_length": draw(st.sampled_from(MAX_LENGTHS)),
        "pad_to_multiple_of": draw(st.sampled_from(MULTIPLES)),
    }
    return rows, options
