"""Differential tests: fastcollate's TRL preference collators and pad helpers against TRL's own
(TRL 1.16) on the same hypothesis-generated batches — DPO's `DataCollatorForPreference`
(truncation modes, `max_length`, `pad_to_multiple_of`, reference log-probabilities), the reward
trainer's `DataCollatorForPreference` (list / numpy / torch rows, margins), KTO's
`DataCollatorForUnpairedPreference` (KL completions, labels, reference log-probabilities) and
`trl.trainer.utils.pad` (1-d and 2-d tensors, both sides, mixed dtypes) — plus the four-step
GRPO padding against `pad_with_mask`, bad input, and the documented differences."""

from __future__ import annotations

import array
import copy
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.support.hypothesis_profiles import examples

pytest.importorskip("trl", reason="TRL 1.16 needs Python >= 3.11")

from trl.trainer.dpo_trainer import DataCollatorForPreference as TRLPreference  # noqa: E402
from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference as TRLUnpaired  # noqa: E402
from trl.trainer.reward_trainer import DataCollatorForPreference as TRLReward  # noqa: E402
from trl.trainer.utils import pad as trl_pad  # noqa: E402

from fastcollate import _native  # noqa: E402
from fastcollate.trl import (  # noqa: E402
    DataCollatorForPreference,
    DataCollatorForUnpairedPreference,
    RewardDataCollatorForPreference,
    pad,
    pad_with_mask,
)
from tests.support.compare import (  # noqa: E402
    assert_same_batch,
    assert_same_value,
    assert_unchanged,
)
from tests.support.preference_cases import (  # noqa: E402
    MAX_LENGTHS,
    MULTIPLES,
    PAD_IDS,
    dpo_case,
    ids,
    kto_case,
    reward_case,
)

pytestmark = pytest.mark.parity

SETTINGS = settings(
    max_examples=examples(50),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def compare(ours_class, theirs_class, rows, options):
    before = copy.deepcopy(rows)
    ours = ours_class(**options)(rows)
    assert_unchanged(rows, before)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.tensor(tensor) warns inside TRL
        expected = theirs_class(**options)(copy.deepcopy(rows))
    assert_same_batch(ours, expected)
    return ours


@SETTINGS
@given(case=dpo_case())
def test_dpo_same_output_as_trl(case):
    rows, options = case
    compare(DataCollatorForPreference, TRLPreference, rows, options)


def test_dpo_docstring_example_and_truncation():
    rows = [
        {"prompt_ids": [1, 2, 3], "chosen_ids": [4, 5], "rejected_ids": [6]},
        {"prompt_ids": [7, 8], "chosen_ids": [9], "rejected_ids": [10, 11]},
    ]
    batch = compare(DataCollatorForPreference, TRLPreference, rows, {"pad_token_id": 0})
    assert batch["input_ids"].tolist() == [
        [1, 2, 3, 4, 5], [7, 8, 9, 0, 0], [1, 2, 3, 6, 0], [7, 8, 10, 11, 0]
    ]  # fmt: skip
    assert batch["completion_mask"].tolist() == [
        [0, 0, 0, 1, 1], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 1, 1, 0]
    ]  # fmt: skip
    options = {"pad_token_id": 0, "max_length": 3, "truncation_mode": "keep_end"}
    batch = compare(DataCollatorForPreference, TRLPreference, rows, options)
    assert batch["input_ids"].tolist() == [[3, 4, 5], [7, 8, 9], [2, 3, 6], [8, 10, 11]]
    assert batch["completion_mask"].tolist() == [[0, 1, 1], [0, 0, 1], [0, 0, 1], [0, 1, 1]]


def test_dpo_is_trls_class():
    assert isinstance(DataCollatorForPreference(pad_token_id=0), TRLPreference)


# --- reward ----------------------------------------------------------------------------------


@SETTINGS
@given(case=reward_case())
def test_reward_same_output_as_trl(case):
    rows, options = case
    compare(RewardDataCollatorForPreference, TRLReward, rows, options)


def test_reward_is_trls_class():
    assert isinstance(RewardDataCollatorForPreference(pad_token_id=0), TRLReward)


def same_bits(ours, theirs):
    """Equal dtype, shape and bits (NaN's sign and payload included)."""
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert torch.equal(ours.view(torch.int32), theirs.view(torch.int32))


@SETTINGS
@given(
    values=st.lists(st.floats(width=64), min_size=1, max_size=6),
    float64_default=st.booleans(),
)
def test_float_margins_and_logps_rounded_to_float32_bit_for_bit_as_trl(values, float64_default):
    """Rows of Python floats (any double: past float32's range, subnormal, NaN, -0.0) become the
    float32 tensor TRL's `torch.tensor` makes, also when the default dtype is float64 (DPO's and
    KTO's reference log-probabilities then stay float64, as TRL's do)."""
    reward_rows = [{"chosen_ids": [1], "rejected_ids": [2, 3], "margin": v} for v in values]
    dpo_rows = [
        {"prompt_ids": [1], "chosen_ids": [2], "rejected_ids": [3], "ref_chosen_logps": v,
         "ref_rejected_logps": -v}
        for v in values
    ]
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64 if float64_default else torch.float32)
    try:
        kto_rows = [
            {"prompt_ids": [1], "completion_ids": [2], "ref_logps": v, "ref_KL_logps": -v,
             "label": True}
            for v in values
        ]
        cases = [
            (RewardDataCollatorForPreference, TRLReward, reward_rows, ["margin"]),
            (DataCollatorForPreference, TRLPreference, dpo_rows,
             ["ref_chosen_logps", "ref_rejected_logps"]),
            (DataCollatorForUnpairedPreference, TRLUnpaired, kto_rows,
             ["ref_logps", "ref_KL_logps"]),
        ]
        for ours_class, theirs_class, rows, keys in cases:
            before = copy.deepcopy(rows)
            ours = ours_class(pad_token_id=0)(rows)
            assert_unchanged_floats(rows, before)
            theirs = theirs_class(pad_token_id=0)(copy.deepcopy(rows))
            assert list(ours) == list(theirs)
            for key in keys:
                if theirs[key].dtype == torch.float64:
                    assert ours[key].dtype == torch.float64
                    assert torch.equal(ours[key].view(torch.int64), theirs[key].view(torch.int64))
                else:
                    same_bits(ours[key], theirs[key])
    finally:
        torch.set_default_dtype(default)


def assert_unchanged_floats(rows, before):
    """As `assert_unchanged`, with NaN equal to itself."""
    for row, old in zip(rows, before, strict=True):
        assert list(row) == list(old)
        for key, value in row.items():
            assert type(value) is type(old[key])
            assert value == old[key] or (value != value and old[key] != old[key]), key


@SETTINGS
@given(case=kto_case())
def test_kto_same_output_as_trl(case):
    rows, options = case
    compare(DataCollatorForUnpairedPreference, TRLUnpaired, rows, options)


def test_kto_is_trls_class():
    assert isinstance(DataCollatorForUnpairedPreference(pad_token_id=0), TRLUnpaired)


# --- pad -------------------------------------------------------------------------------------
TENSOR_DTYPES = [
    torch.int64, torch.int32, torch.uint8, torch.float32, torch.float64, torch.bool,
    torch.float16, torch.bfloat16,
]  # fmt: skip
# Pad values TRL's torch.full takes or refuses, by dtype: large ints (beyond 2**53, int64's
# ends), negative and fractional floats.
PAD_VALUES = [0, 1, 7, -100, 151643, 2**53 + 1, 2**63 - 1, -(2**63), 0.0, -1.5, 1e30, True]


@st.composite
def pad_case(draw):
    """Tensors as TRL's trainers and users hand them to `pad`: ranks 1 to 3, one or mixed
    dtypes, empty rows anywhere, strided slices and 1-d views of one shared storage."""
    rank = draw(st.sampled_from([1, 1, 1, 2, 3]))
    mixed = draw(st.integers(0, 3)) == 0
    # GRPO's own batches (int64 ids and masks, float32 log-probabilities) drawn most often.
    dtype = draw(st.sampled_from([torch.int64, torch.int64, torch.float32, *TENSOR_DTYPES]))
    layout = draw(st.sampled_from(["own", "strided", "shared"])) if rank == 1 else "own"
    count = draw(st.integers(1, 6))
    shapes = [
        [draw(st.integers(0, 7))] + [draw(st.integers(1, 3)) for _ in range(rank - 1)]
        for _ in range(count)
    ]
    total = sum(int(np.prod(shape)) for shape in shapes)
    values = torch.tensor(draw(st.lists(st.integers(0, 200), min_size=total, max_size=total)),
                          dtype=torch.int64)  # fmt: skip
    tensors, start = [], 0
    for shape in shapes:
        size = int(np.prod(shape))
        if layout == "strided":  # every other value of a twice-as-long tensor
            row = torch.stack([values[start : start + size], -values[start : start + size]], 1)
            tensor = row.reshape(-1)[::2]
        elif layout == "shared":  # a view into the one `values` tensor, overlapping its neighbours
            tensor = values[max(0, start - 1) : max(0, start - 1) + size]
        else:
            tensor = values[start : start + size].clone().reshape(shape)
        start += size
        tensors.append(tensor.to(draw(st.sampled_from(TENSOR_DTYPES)) if mixed else dtype))
    return tensors, {
        "padding_value": draw(st.sampled_from(PAD_VALUES)),
        "padding_side": draw(st.sampled_from(["left", "right"])),
        "pad_to_multiple_of": draw(st.sampled_from(MULTIPLES)),
    }


def trl_pad_or_error(tensors, options):
    try:
        return trl_pad(tensors, **options)
    except (RuntimeError, TypeError, ValueError, OverflowError) as error:
        return error


@SETTINGS
@given(case=pad_case())
def test_pad_same_output_as_trl(case):
    tensors, options = case
    before = [t.clone() for t in tensors]
    expected = trl_pad_or_error(tensors, options)
    if isinstance(expected, Exception):
        # A pad value the dtype cannot hold: torch.full refuses it for TRL and for us alike.
        with pytest.raises(type(expected)):
            pad(tensors, **options)
        return
    ours = pad(tensors, **options)
    assert all(torch.equal(a, b) for a, b in zip(tensors, before, strict=True))
    assert_same_value("pad", ours, expected)
    assert ours.device == expected.device
    assert ours.is_contiguous()
    assert not ours.requires_grad


@SETTINGS
@given(
    lengths=st.lists(st.integers(0, 6), min_size=1, max_size=6),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]),
    grad=st.lists(st.booleans(), min_size=6, max_size=6),
    padding_side=st.sampled_from(["left", "right"]),
    pad_to_multiple_of=st.sampled_from(MULTIPLES),
)
def test_pad_keeps_trls_autograd(lengths, dtype, grad, padding_side, pad_to_multiple_of):
    """Rows that require grad: the output requires grad as TRL's does (it copies them into a
    fresh tensor in place), and a loss on it gives every row TRL's gradient; under no_grad
    nothing is tracked."""
    options = {"padding_value": -1.5, "padding_side": padding_side,
               "pad_to_multiple_of": pad_to_multiple_of}  # fmt: skip

    def rows():
        made = []
        for index, length in enumerate(lengths):
            row = (torch.arange(length, dtype=torch.float64) / 4 - index).to(dtype)
            made.append(row.requires_grad_(grad[index]))
        return made

    ours_in, theirs_in = rows(), rows()
    ours, expected = pad(ours_in, **options), trl_pad(theirs_in, **options)
    assert_same_value("pad", ours.detach(), expected.detach())
    assert ours.requires_grad == expected.requires_grad == any(grad[: len(lengths)])
    if expected.requires_grad:
        weights = torch.arange(expected.numel(), dtype=dtype).reshape(expected.shape) + 1
        (ours * weights).sum().backward()
        (expected * weights).sum().backward()
        for mine, theirs in zip(ours_in, theirs_in, strict=True):
            assert (mine.grad is None) == (theirs.grad is None)
            if theirs.grad is not None:
                assert_same_value("grad", mine.grad, theirs.grad)
    with torch.no_grad():
        assert not pad(ours_in, **options).requires_grad


@pytest.mark.parametrize("pad_to_multiple_of", MULTIPLES)
@pytest.mark.parametrize("padding_side", ["left", "right"])
def test_pad_grpo_batches_same_as_trl(padding_side, pad_to_multiple_of):
    """GRPO's four pads of prompts and completions (ids, `ones_like` masks) and its log-probs."""
    rng = np.random.default_rng(len(padding_side) + (pad_to_multiple_of or 0))
    lengths = [0, *rng.integers(1, 40, 30).tolist(), 0]
    ids = [torch.tensor(rng.integers(0, 2**40, n).tolist()) for n in lengths]
    masks = [torch.ones_like(row, dtype=torch.long) for row in ids]
    logps = [torch.tensor((-rng.random(n)).tolist()) for n in lengths]
    options = {"padding_side": padding_side, "pad_to_multiple_of": pad_to_multiple_of}
    for tensors, value in ((ids, 151643), (masks, 0), (logps, 0.0), (ids, 2**63 - 1)):
        expected = trl_pad(tensors, value, **options)
        assert_same_value("pad", pad(tensors, value, **options), expected)
    for tensors in (ids, masks, ids[1:2]):
        assert_same_value("pad", pad(tensors), trl_pad(tensors))


def test_pad_off_the_cpu_keeps_trls_device_and_errors():
    """Tensors on another device (meta: shapes without values, no accelerator needed) take the
    torch path, and come back on it as TRL's do; a batch over two devices pads on the first
    tensor's device, or fails as TRL's copy fails."""
    for dtype in (torch.int64, torch.float32, torch.bool):
        tensors = [torch.empty(n, dtype=dtype, device="meta") for n in (3, 0, 5)]
        for side in ("left", "right"):
            ours, expected = pad(tensors, 1, side, 4), trl_pad(tensors, 1, side, 4)
            assert (ours.device, ours.dtype, ours.shape) == (
                expected.device, expected.dtype, expected.shape)  # fmt: skip
    mixed = [torch.tensor([1, 2]), torch.empty(3, dtype=torch.int64, device="meta")]
    with pytest.raises(Exception) as theirs:
        trl_pad(mixed)
    with pytest.raises(type(theirs.value)):
        pad(mixed)
    on_meta = pad(mixed[::-1])
    assert on_meta.device.type == "meta" and on_meta.shape == (2, 3)


def test_pad_docstring_examples():
    assert pad([torch.tensor([1, 2, 3]), torch.tensor([4, 5])]).tolist() == [[1, 2, 3], [4, 5, 0]]
    two = [torch.tensor([[1, 2], [3, 4]]), torch.tensor([[5, 6]])]
    assert pad(two, padding_side="left").tolist() == [[[1, 2], [3, 4]], [[0, 0], [5, 6]]]


def grpo_padding(sequences, padding_value, padding_side, pad_to_multiple_of):
    """What TRL's GRPO trainer does with a list of prompts or completions."""
    tensors = [torch.tensor(row) for row in sequences]
    masks = [torch.ones_like(row, dtype=torch.long) for row in tensors]
    return (
        trl_pad(tensors, padding_value, padding_side, pad_to_multiple_of),
        trl_pad(masks, 0, padding_side, pad_to_multiple_of),
    )


@SETTINGS
@given(
    sequences=st.lists(ids(), min_size=1, max_size=6).filter(lambda rows: rows[0]),
    padding_value=st.sampled_from(PAD_IDS),
    padding_side=st.sampled_from(["left", "right"]),
    pad_to_multiple_of=st.sampled_from(MULTIPLES),
)
def test_pad_with_mask_same_as_grpos_padding(
    sequences, padding_value, padding_side, pad_to_multiple_of
):
    before = copy.deepcopy(sequences)
    ours = pad_with_mask(sequences, padding_value, padding_side, pad_to_multiple_of)
    assert sequences == before
    expected = grpo_padding(sequences, padding_value, padding_side, pad_to_multiple_of)
    assert_same_value("ids", ours[0], expected[0])
    assert_same_value("mask", ours[1], expected[1])


@SETTINGS
@given(
    sequences=st.lists(
        st.tuples(
            st.lists(st.integers(-(2**63), 2**63 - 1), max_size=8),
            st.sampled_from([list, tuple]),
        ).map(lambda pair: pair[1](pair[0])),
        min_size=1,
        max_size=6,
    ).filter(lambda rows: rows[0]),
    padding_value=st.sampled_from(PAD_IDS),
    padding_side=st.sampled_from(["left", "right"]),
    pad_to_multiple_of=st.sampled_from(MULTIPLES),
)
def test_pad_with_mask_reads_lists_and_tuples_in_place_as_grpo_pads_them(
    sequences, padding_value, padding_side, pad_to_multiple_of
):
    # Lists and tuples of ints (the whole int64 range, empty rows after the first) take the
    # native call's in-place path; int64 output and mask, as TRL's four steps give.
    left = padding_side == "left"
    native = _native.pad_sequences(
        sequences, pad_id=padding_value, multiple=pad_to_multiple_of, left=left
    )
    assert native is not None
    before = copy.deepcopy(sequences)
    ours = pad_with_mask(sequences, padding_value, padding_side, pad_to_multiple_of)
    assert sequences == before
    expected = grpo_padding(sequences, padding_value, padding_side, pad_to_multiple_of)
    for name, mine, theirs in zip(("ids", "mask"), ours, expected, strict=True):
        assert mine.dtype == theirs.dtype == torch.int64
        assert_same_value(name, mine, theirs)
    assert all(np.array_equal(a, b.numpy()) for a, b in zip(native, ours, strict=True))


def test_pad_with_mask_reads_what_it_cannot_write_in_place_the_general_way_in_the_same_call():
    # The native call takes every batch: rows the strict route refuses (numpy ints, all-empty
    # rows) are read into a column and padded there; bad rows are an error naming the row.
    left = {"pad_id": 0, "multiple": None, "left": True}
    numpy_ints = [[np.int64(3), 4], [5]]
    for padded in (numpy_ints, [[]]):
        ids, mask = _native.pad_sequences(padded, **left)
        expected = grpo_padding(padded, 0, "left", None)
        assert ids.dtype == mask.dtype == np.int64
        assert_same_value("ids", torch.from_numpy(ids), expected[0].to(torch.int64))
        assert_same_value("mask", torch.from_numpy(mask), expected[1])
    for refused in ([[1], (2,), np.array([3])], [[1.0]], [[True]], [[2**63]]):
        with pytest.raises((TypeError, ValueError), match=r"'sequences' in row \d"):
            _native.pad_sequences(refused, **left)
    ids_, mask = pad_with_mask(numpy_ints, 0, "left")
    expected = grpo_padding(numpy_ints, 0, "left", None)
    assert_same_value("ids", ids_, expected[0])
    assert_same_value("mask", mask, expected[1])
    with pytest.raises(ValueError, match=r"'sequences' in row 0 .* does not fit in int64"):
        pad_with_mask([[2**63]])
    with pytest.raises(TypeError, match=r"'sequences' in row 0 holds a float"):
        pad_with_mask([[1.0]])


@SETTINGS
@given(
    lengths=st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=5
    ),
    with_prompt=st.booleans(),
    together=st.booleans(),
    max_length=st.sampled_from(MAX_LENGTHS),
    keep_end=st.booleans(),
    multiple=st.sampled_from(MULTIPLES),
    sequence=st.sampled_from([list, tuple]),
)
def test_prompt_completion_in_place_path_same_as_the_general_path(
    lengths, with_prompt, together, max_length, keep_end, multiple, sequence
):
    # Exact dicts of lists or tuples are read in place; a dict subclass goes through columns.
    class Row(dict):
        pass

    rows = [
        {
            key: sequence(range(100 * row + 10 * index, 100 * row + 10 * index + n))
            for index, (key, n) in enumerate(zip(("p", "a", "b"), sizes, strict=True))
        }
        for row, sizes in enumerate(lengths)
    ]
    assume(any(lengths))
    options = {
        "together": together,
        "pad_id": 7,
        "multiple": multiple,
        "max_length": max_length,
        "keep_end": keep_end,
    }
    prompt = "p" if with_prompt else None
    *in_place, strictly = _native.pad_prompt_completion(rows, prompt, ["a", "b"], **options)
    *general, laxly = _native.pad_prompt_completion(
        [Row(r) for r in rows], prompt, ["a", "b"], **options
    )
    # The last item says which route read the rows: the strict one for exact dicts of lists or
    # tuples holding at least one token (a batch without a single token has no element type
    # yet, which the lax route settles), the lax one for the others (whose rows the collators
    # then check themselves); the matrices are the same either way.
    assert strictly is bool(any(p * with_prompt + a + b for p, a, b in lengths))
    assert laxly is False
    assert len(in_place) == len(general) == (1 if together else 2)
    for mine, theirs in zip(in_place, general, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            assert a.dtype == b.dtype == np.int64
            np.testing.assert_array_equal(a, b)


SCALAR_VALUES = st.one_of(
    st.floats(width=64),
    st.booleans(),
    st.integers(-3, 3),
    st.just(np.float64(0.5)),
    st.just(np.bool_(True)),
    st.none(),
)


@SETTINGS
@given(
    columns=st.lists(
        st.tuples(st.sampled_from(["float32", "bool"]), st.lists(SCALAR_VALUES, min_size=1)),
        min_size=1,
        max_size=3,
    ),
    missing=st.booleans(),
    subclass=st.booleans(),
)
def test_scalars_read_with_the_tokens_exactly_when_every_row_holds_that_exact_kind(
    columns, missing, subclass
):
    """`scalars`: a column comes back as the array `_scalars` would make (float32 rounded as
    `array("f")` rounds, bools as bools) exactly when every row is an exact dict holding an
    exact float (float32) or bool (bool) under the key; else None, for the collator to read
    the column itself. The matrices are the same either way."""
    rows_count = min(len(values) for _, values in columns)

    class Row(dict):
        pass

    rows = []
    for row in range(rows_count):
        values = {f"s{index}": values[row] for index, (_, values) in enumerate(columns)}
        rows.append({"a": [row, 1], **values})
    if missing:
        del rows[-1]["s0"]
    if subclass:
        rows[0] = Row(rows[0])
    scalars = [(f"s{index}", kind) for index, (kind, _) in enumerate(columns)]
    options = {"together": True, "pad_id": 0, "multiple": None, "max_length": None,
               "keep_end": False}  # fmt: skip
    before = copy.deepcopy(rows)
    read = _native.pad_prompt_completion(rows, None, ["a"], **options, scalars=scalars)
    assert_unchanged_floats(rows, before)
    plain = _native.pad_prompt_completion(rows, None, ["a"], **options)
    assert len(read) == len(plain) + len(scalars)
    for mine, theirs in zip(read[0], plain[0], strict=True):
        np.testing.assert_array_equal(mine, theirs)
    for (key, kind), column in zip(scalars, read[len(plain) - 1 : -1], strict=True):
        values = [row.get(key) for row in rows]
        exact = float if kind == "float32" else bool
        if subclass or any(type(value) is not exact for value in values):
            assert column is None
        elif kind == "float32":
            assert column.dtype == np.float32
            np.testing.assert_array_equal(column.view(np.int32),
                                          np.array(array.array("f", values)).view(np.int32))
        else:
            assert column.dtype == np.bool_
            assert column.tolist() == values


def test_scalars_of_an_unknown_kind_are_refused():
    row = {"a": [1], "m": 1.0}
    options = {"together": True, "pad_id": 0, "multiple": None, "max_length": None,
               "keep_end": False}  # fmt: skip
    with pytest.raises(ValueError, match="unknown scalar kind 'float64'"):
        _native.pad_prompt_completion([row], None, ["a"], **options, scalars=[("m", "float64")])


@pytest.mark.parametrize(
    "first, second",
    [(True, 1), (1, True), (True, np.bool_(False)), (0.5, 1), (1.5, True), (np.float64(1.0), 2.0)],
)
def test_reward_and_kto_scalars_of_mixed_kinds_read_from_the_rows_as_trl(first, second):
    """A scalar column that is not all exact floats / bools comes from the rows (TRL's
    `torch.tensor`), the tokens still from the in-place read."""
    reward_rows = [{"chosen_ids": [1], "rejected_ids": [2, 3], "margin": first},
                   {"chosen_ids": [4, 5], "rejected_ids": [6], "margin": second}]  # fmt: skip
    compare(RewardDataCollatorForPreference, TRLReward, reward_rows, {"pad_token_id": 0})
    kto_rows = [
        {"prompt_ids": [1], "completion_ids": [2], "KL_completion_ids": [3],
         "ref_logps": first, "ref_KL_logps": second, "label": first},
        {"prompt_ids": [4, 5], "completion_ids": [6], "KL_completion_ids": [7, 8],
         "ref_logps": second, "ref_KL_logps": first, "label": second},
    ]  # fmt: skip
    compare(DataCollatorForUnpairedPreference, TRLUnpaired, kto_rows, {"pad_token_id": 0})


def test_usual_batch_scalars_come_from_the_native_call_and_others_from_the_rows(monkeypatch):
    """Margins, labels and float reference log-probabilities of the usual batch (exact floats
    and bools) are read with the tokens; a column of another kind goes through `_scalars`."""
    from fastcollate.trl import preference

    called = []
    rows_path = preference._scalars
    monkeypatch.setattr(
        preference, "_scalars", lambda rows, key, *a: called.append(key) or rows_path(rows, key, *a)
    )
    reward = [{"chosen_ids": [1], "rejected_ids": [2, 3], "margin": 0.5}]
    kto = [{"prompt_ids": [1], "completion_ids": [2], "ref_logps": -1.5, "label": True}]
    compare(RewardDataCollatorForPreference, TRLReward, reward, {"pad_token_id": 0})
    compare(DataCollatorForUnpairedPreference, TRLUnpaired, kto, {"pad_token_id": 0})
    assert called == []
    reward[0]["margin"] = 1
    kto[0]["label"] = 0
    compare(RewardDataCollatorForPreference, TRLReward, reward, {"pad_token_id": 0})
    compare(DataCollatorForUnpairedPreference, TRLUnpaired, kto, {"pad_token_id": 0})
    assert called == ["margin", "label"]


# --- documented differences and bad input ----------------------------------------------------
def test_an_empty_first_sequence_stays_int64_where_trl_turns_float32():
    rows = [{"prompt_ids": [], "chosen_ids": [], "rejected_ids": [5]}]
    ours = DataCollatorForPreference(pad_token_id=0)(rows)
    assert ours["input_ids"].dtype == torch.int64
    assert TRLPreference(pad_token_id=0)(copy.deepcopy(rows))["input_ids"].dtype == torch.float32
    rows = [{"chosen_ids": [], "rejected_ids": [5]}]
    assert RewardDataCollatorForPreference(pad_token_id=0)(rows)["input_ids"].dtype == torch.int64
    assert pad_with_mask([[], [1]])[0].dtype == torch.int64


def dpo_row(**changes):
    row = {"prompt_ids": [1, 2], "chosen_ids": [3], "rejected_ids": [4, 5]}
    row.update(changes)
    return row


@pytest.mark.parametrize(
    ("rows", "error", "match"),
    [
        ([], ValueError, "empty batch"),
        ({"prompt_ids": [1]}, TypeError, "list of rows"),
        ([dpo_row(), [1, 2]], TypeError, "row 1 is a list"),
        ([dpo_row(), {"prompt_ids": [1], "chosen_ids": [2]}], ValueError, "row 1 has no 'rejected"),
        ([dpo_row(), dpo_row(chosen_ids=np.array([3]))], TypeError, "'chosen_ids' in row 1"),
        ([dpo_row(), dpo_row(prompt_ids=torch.tensor([3]))], TypeError, "'prompt_ids' in row 1"),
        ([dpo_row(), dpo_row(rejected_ids=[1, 2.5])], TypeError, "'rejected_ids' in row 1"),
        ([dpo_row(), dpo_row(chosen_ids=[2**64])], ValueError, "'chosen_ids' in row 1"),
        ([dpo_row(), dpo_row(chosen_ids=["a"])], TypeError, "'chosen_ids' in row 1"),
        ([dpo_row(), dpo_row(chosen_ids=[[1]])], TypeError, "'chosen_ids' in row 1"),
        (
            [dpo_row(ref_chosen_logps=0.5), dpo_row(ref_chosen_logps="x")],
            TypeError,
            "'ref_chosen_logps' in row 1",
        ),
        ([dpo_row(ref_chosen_logps=0.5), dpo_row()], ValueError, "row 1 has no 'ref_chosen"),
    ],
)
def test_dpo_bad_input_names_key_and_row(rows, error, match):
    before = copy.deepcopy(rows)
    with pytest.raises(error, match=match):
        DataCollatorForPreference(pad_token_id=0)(rows)
    if isinstance(rows, list):
        assert_unchanged([r for r in rows if isinstance(r, dict)], [
            r for r in before if isinstance(r, dict)])  # fmt: skip


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"truncation_mode": "keep_middle"}, ValueError, "truncation mode"),
        ({"max_length": 0}, ValueError, "max_length"),
        ({"max_length": 2.5}, TypeError, "max_length"),
        ({"pad_to_multiple_of": 0}, ValueError, "pad_to_multiple_of"),
        ({"pad_token_id": None}, TypeError, "pad_token_id"),
        ({"return_tensors": "np"}, ValueError, "return_tensors"),
    ],
)
def test_dpo_options_that_cannot_be_honoured_raise(options, error, match):
    with pytest.raises(error, match=match):
        DataCollatorForPreference(**{"pad_token_id": 0, **options})([dpo_row()])


def test_reward_and_kto_bad_input():
    with pytest.raises(TypeError, match="'rejected_ids' in row 1 holds float32"):
        RewardDataCollatorForPreference(pad_token_id=0)(
            [{"chosen_ids": [1], "rejected_ids": [2]},
             {"chosen_ids": [1], "rejected_ids": np.array([2], np.float32)}]
        )  # fmt: skip
    with pytest.raises(ValueError, match="int16"):  # TRL would fail inside torch.full
        RewardDataCollatorForPreference(pad_token_id=70000)(
            [{"chosen_ids": np.array([1], np.int16), "rejected_ids": [2, 3]}]
        )
    with pytest.raises(ValueError, match="row 1 has no 'margin'"):
        RewardDataCollatorForPreference(pad_token_id=0)(
            [{"chosen_ids": [1], "rejected_ids": [2], "margin": 1.0},
             {"chosen_ids": [1], "rejected_ids": [2]}]
        )  # fmt: skip
    with pytest.raises(TypeError, match="'margin' in row 1 is 'x'"):
        RewardDataCollatorForPreference(pad_token_id=0)(
            [{"chosen_ids": [1], "rejected_ids": [2], "margin": 1.0},
             {"chosen_ids": [1], "rejected_ids": [2], "margin": "x"}]
        )  # fmt: skip
    kto = DataCollatorForUnpairedPreference(pad_token_id=0)
    with pytest.raises(ValueError, match="row 1 has no 'ref_logps'"):
        kto([{"prompt_ids": [1], "completion_ids": [2], "ref_logps": -1.0, "label": True},
             {"prompt_ids": [1], "completion_ids": [2], "label": True}])  # fmt: skip
    with pytest.raises(ValueError, match="row 1 has no 'label'"):
        kto([{"prompt_ids": [1], "completion_ids": [2], "label": True},
             {"prompt_ids": [1], "completion_ids": [2]}])  # fmt: skip
    with pytest.raises(TypeError, match="'prompt_ids' \\+ 'KL_completion_ids' in row 0"):
        kto([{"prompt_ids": [1], "completion_ids": [2], "KL_completion_ids": [0.5], "label": 1}])


def test_pad_bad_input():
    with pytest.raises(ValueError, match="padding_side"):
        pad([torch.tensor([1])], padding_side="middle")
    with pytest.raises(ValueError, match="empty"):
        pad([])
    with pytest.raises(TypeError, match=r"tensors\[1\] is a list"):
        pad([torch.tensor([1]), [2]])
    with pytest.raises(ValueError, match=r"tensors\[1\] has 2 dimensions"):
        pad([torch.tensor([1]), torch.tensor([[2]])])
    with pytest.raises(TypeError, match="'sequences' in row 1 is a Tensor"):
        pad_with_mask([[1], torch.tensor([2])])
    with pytest.raises(TypeError, match="'sequences' in row 1 holds a float"):
        pad_with_mask([[1], [2.0]])
    with pytest.raises(ValueError, match="padding_side"):
        pad_with_mask([[1]], padding_side="top")


def test_kto_rows_without_completions_give_labels_only_as_trl():
    rows = [{"prompt_ids": [1], "label": True, "ref_logps": -1.0}]
    compare(DataCollatorForUnpairedPreference, TRLUnpaired, rows, {"pad_token_id": 0})
