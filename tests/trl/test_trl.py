"""Differential tests: `fastcollate.trl.DataCollatorForLanguageModeling` against TRL's own
`trl.trainer.sft_trainer.DataCollatorForLanguageModeling` (TRL 1.16) on the same
hypothesis-generated batches — list / numpy / torch rows, rows with and without labels, pre-packed
rows (`seq_lengths`), rows carrying `completion_mask` / `assistant_masks`, every option — plus
Arrow batches against the row path, bad input, and the optional-dependency hint. TRL pads on the
right only (it has no padding side), so there is no left-padding case to compare."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.support.hypothesis_profiles import examples

pytest.importorskip("trl", reason="TRL 1.16 needs Python >= 3.11")

import datasets  # noqa: E402
from trl.trainer.sft_trainer import (  # noqa: E402
    DataCollatorForLanguageModeling as TRLDataCollatorForLanguageModeling,
)

import fastcollate  # noqa: E402
import fastcollate.trl  # noqa: E402
from fastcollate import ArrowBatches, _native  # noqa: E402
from fastcollate._internal.extras import install_command  # noqa: E402
from fastcollate.trl import DataCollatorForLanguageModeling  # noqa: E402
from tests.support.blocked_imports import run_without  # noqa: E402
from tests.support.compare import assert_same_batch, assert_unchanged, to_format  # noqa: E402

pytestmark = pytest.mark.parity

SETTINGS = settings(
    max_examples=examples(50),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@st.composite
def pieces(draw, length):
    """`length` cut into positive sequence lengths (a packed row's `seq_lengths`)."""
    cuts = sorted(draw(st.sets(st.integers(1, length - 1), max_size=4))) if length > 1 else []
    bounds = [0, *cuts, length]
    return [b - a for a, b in zip(bounds, bounds[1:], strict=False)]


@st.composite
def sft_case(draw, formats=("list", "numpy", "torch", "mixed")):
    fmt = draw(st.sampled_from(formats))
    # One integer dtype per batch for arrays (TRL pads into the first row's).
    dtype = np.int64 if fmt in ("list", "mixed") else draw(st.sampled_from([np.int64, np.int32]))
    labels = draw(st.sampled_from(["all", "none", "some"]))
    packed = draw(st.booleans())
    masks = draw(st.booleans())
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        length = draw(st.integers(1, 24))
        ids = draw(st.lists(st.integers(0, 30000), min_size=length, max_size=length))
        row_fmt = draw(st.sampled_from(["list", "numpy", "torch"])) if fmt == "mixed" else fmt
        row = {"input_ids": to_format(ids, row_fmt, dtype)}
        if labels == "all" or (labels == "some" and draw(st.booleans())):
            prompt = draw(st.integers(0, length))
            row["labels"] = to_format([-100] * prompt + ids[prompt:], row_fmt, dtype)
        if masks:
            row["completion_mask"] = [int(j >= length // 2) for j in range(length)]
            row["assistant_masks"] = [1] * length
        if packed:
            row["seq_lengths"] = draw(pieces(length))
        rows.append(row)
    options = {
        "pad_token_id": draw(st.sampled_from([0, 2, 151643])),
        "padding_free": draw(st.booleans()),
        "return_position_ids": draw(st.booleans()),
        "pad_to_multiple_of": draw(st.sampled_from([None, 1, 4, 8, 64])),
    }
    event(f"format={fmt} labels={labels} packed={packed} padding_free={options['padding_free']}")
    return rows, options


def theirs(rows, options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.tensor(tensor) warns inside TRL
        return TRLDataCollatorForLanguageModeling(**options)(copy.deepcopy(rows))


@SETTINGS
@given(case=sft_case())
def test_same_output_as_trl(case):
    rows, options = case
    before = copy.deepcopy(rows)
    ours = DataCollatorForLanguageModeling(**options)(rows)
    assert_unchanged(rows, before)
    expected = theirs(rows, options)
    assert_same_batch(ours, expected)
    if options["padding_free"]:
        assert ours["cu_seq_lens_q"] is ours["cu_seq_lens_k"]  # one tensor, as in TRL


def test_docstring_examples_and_packed_position_ids():
    collator = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)
    rows = [{"input_ids": [1, 2, 3, 4, 5], "seq_lengths": [2, 3]}, {"input_ids": [6, 7]}]
    rows[1]["seq_lengths"] = [2]
    batch = collator(rows)
    assert batch["position_ids"].tolist() == [[0, 1, 0, 1, 2, 0, 1]]
    assert batch["labels"].tolist() == [[-100, 2, -100, 4, 5, -100, 7]]
    assert batch["cu_seq_lens_q"].tolist() == [0, 2, 5, 7]
    assert batch["seq_idx"].tolist() == [[0, 0, 1, 1, 1, 2, 2]]
    assert batch["max_length_q"] == batch["max_length_k"] == 3
    assert_same_batch(batch, theirs(rows, {"pad_token_id": 0, "padding_free": True}))


def test_padding_free_pad_to_multiple_of_makes_each_pad_a_sequence_as_trl_does():
    rows = [{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5]}]
    options = {"pad_token_id": 0, "padding_free": True, "pad_to_multiple_of": 8}
    batch = DataCollatorForLanguageModeling(**options)(rows)
    assert batch["cu_seq_lens_q"].tolist() == [0, 3, 5, 6, 7, 8]
    assert_same_batch(batch, theirs(rows, options))


def test_is_trls_class_and_keeps_its_constructor():
    collator = DataCollatorForLanguageModeling(7, padding_free=True)
    assert isinstance(collator, TRLDataCollatorForLanguageModeling)
    assert (collator.pad_token_id, collator.padding_free, collator.return_tensors) == (
        7,
        True,
        "pt",
    )
    assert collator.accepts_arrow_batches

    class Custom(DataCollatorForLanguageModeling):
        def torch_call(self, examples):
            return super().torch_call(list(examples))

    assert not Custom(0).accepts_arrow_batches


def test_outputs_are_numpy_buffers_shared_with_torch():
    batch = DataCollatorForLanguageModeling(pad_token_id=0)(
        [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}]
    )
    for tensor in batch.values():
        # torch.from_numpy keeps the array alive as the tensor's base: no copy was made.
        assert tensor.numpy().base is not None or tensor.numpy().flags.owndata


# --- bad input ----------------------------------------------------------------------------------

BAD = [
    ([{"input_ids": [1]}, {"labels": [1]}], {}, ValueError, r"input_ids.*row 1|row 1.*input_ids"),
    ([{"labels": [1]}], {}, ValueError, "input_ids"),
    ([{"input_ids": [1, 2], "labels": [1]}], {}, ValueError, "'labels' in row 0"),
    (
        [{"input_ids": [1, 2], "labels": [1, 2]}, {"input_ids": [3], "labels": [3, 4]}],
        {"padding_free": True},
        ValueError,
        "'labels' in row 1",
    ),
    ([{"input_ids": [1]}, {"input_ids": [1, 2.5]}], {}, TypeError, "'input_ids' in row 1"),
    ([{"input_ids": np.array([1.0, 2.0])}], {}, TypeError, "'input_ids' in row 0"),
    (
        [{"input_ids": [1]}, {"input_ids": torch.tensor([True])}],
        {"padding_free": True},
        TypeError,
        "'input_ids' in row 1",
    ),
    ([{"input_ids": [1, "a"]}], {}, TypeError, "'input_ids' in row 0"),
    ([{"input_ids": [1, None]}], {}, TypeError, "'input_ids' in row 0"),
    ([{"input_ids": 5}], {}, ValueError, "'input_ids' in row 0"),
    (
        [{"input_ids": [1, 2, 3], "seq_lengths": [2]}],
        {"padding_free": True},
        ValueError,
        "'seq_lengths' in row 0",
    ),
    (
        [{"input_ids": [1, 2], "seq_lengths": [2]}, {"input_ids": [1, 2], "seq_lengths": [1, 2]}],
        {"return_position_ids": True},
        ValueError,
        "'seq_lengths' in row 1",
    ),
    (
        [{"input_ids": [1, 2], "seq_lengths": [0, 2]}],
        {"padding_free": True},
        ValueError,
        "'seq_lengths' in row 0",
    ),
    (
        [{"input_ids": [1, 2], "seq_lengths": [2]}, {"input_ids": [1]}],
        {"padding_free": True},
        ValueError,
        "row 1.*seq_lengths",
    ),
    (
        [{"input_ids": [1, 2], "seq_lengths": [1.5, 0.5]}],
        {"padding_free": True},
        TypeError,
        "'seq_lengths' in row 0",
    ),
    ([], {}, ValueError, "empty"),
    # Padding-free batches are flattened by the core's strict read: no silent float truncation.
    (
        [{"input_ids": [1, 2]}, {"input_ids": [1.5]}],
        {"padding_free": True},
        TypeError,
        "'input_ids' in row 1",
    ),
    ([{"input_ids": [True, False]}], {"padding_free": True}, TypeError, "'input_ids' in row 0"),
    (
        [{"input_ids": [1, 2], "labels": [1, 2]}, {"input_ids": [3], "labels": [0.5]}],
        {"padding_free": True},
        TypeError,
        "'labels' in row 1",
    ),
    (
        [{"input_ids": [1, 2], "labels": [1]}],
        {"padding_free": True},
        ValueError,
        "'labels' in row 0",
    ),
    ([{"input_ids": []}, {"input_ids": []}], {"padding_free": True}, ValueError, "no tokens"),
    ([{"input_ids": [1]}], {"pad_to_multiple_of": 0}, ValueError, "pad_to_multiple_of"),
    ([{"input_ids": [1]}], {"pad_token_id": None}, TypeError, "pad_token_id"),
    ([{"input_ids": np.array([1], dtype=np.uint32)}], {}, TypeError, "'input_ids' in row 0"),
    (
        [{"input_ids": np.array([1], np.int8)}, {"input_ids": [300]}],
        {},
        ValueError,
        "int8",
    ),
]


@pytest.mark.parametrize(("rows", "options", "error", "match"), BAD)
def test_bad_input_names_key_and_row_and_leaves_rows_alone(rows, options, error, match):
    before = copy.deepcopy(rows)
    options = {"pad_token_id": 0, **options}
    with pytest.raises(error, match=match):
        DataCollatorForLanguageModeling(**options)(rows)
    assert_unchanged(rows, before)


def test_padding_free_skips_empty_rows_like_trl():
    rows = [{"input_ids": []}, {"input_ids": [5, 6]}, {"input_ids": []}, {"input_ids": [7]}]
    ours = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(copy.deepcopy(rows))
    theirs = TRLDataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(rows)
    # TRL's empty rows are float tensors (`torch.tensor([])`), which torch.cat promotes the ids
    # and labels to; fastcollate keeps int64 token ids (as before this path, and in docs/trl.md).
    assert theirs["input_ids"].dtype == torch.float32
    for key in ("input_ids", "labels"):
        assert ours[key].dtype == torch.int64
        theirs[key] = theirs[key].to(torch.int64)
    assert_same_batch(ours, theirs)
    assert ours["cu_seq_lens_q"].tolist() == [0, 2, 3]


def test_only_pt_as_in_trl():
    collator = DataCollatorForLanguageModeling(pad_token_id=0)
    # TRL raises "not recognized" for "tf" and an AttributeError (no numpy_call) for "np".
    for kind in ("tf", "np"):
        with pytest.raises(ValueError, match="TRL's collator returns torch tensors only"):
            collator([{"input_ids": [1]}], return_tensors=kind)
        with pytest.raises(ValueError, match="TRL's collator returns torch tensors only"):
            DataCollatorForLanguageModeling(pad_token_id=0, return_tensors=kind)


# --- Arrow batches ------------------------------------------------------------------------------


@SETTINGS
@given(case=sft_case(formats=("list",)), data=st.data())
def test_arrow_batches_equal_the_row_path(case, data):
    rows, options = case
    # A datasets column exists in every row: labels in all rows or none.
    if any("labels" in row for row in rows):
        for row in rows:
            row.setdefault("labels", list(row["input_ids"]))
    dataset = datasets.Dataset.from_list(rows)
    indices = data.draw(st.permutations(range(len(rows))))
    batch = ArrowBatches(dataset).__getitems__(list(indices))
    picked = [rows[i] for i in indices]
    ours = DataCollatorForLanguageModeling(**options)(batch)
    assert_same_batch(ours, DataCollatorForLanguageModeling(**options)(picked))
    assert_same_batch(ours, theirs(picked, options))


def test_arrow_batches_raise_as_the_rows_do():
    rows = [{"input_ids": [1, 2, 3], "seq_lengths": [1, 1]}]
    batch = ArrowBatches(datasets.Dataset.from_list(rows)).__getitems__([0])
    with pytest.raises(ValueError, match="'seq_lengths' in row 0"):
        DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(batch)


# --- the packed rows fastcollate.DataCollatorWithFlattening refuses -----------------------------


def test_flattening_collator_refuses_packed_rows_and_points_here():
    rows = [{"input_ids": [1, 2, 3, 4, 5], "seq_lengths": [2, 3]}]
    for batch in (rows, ArrowBatches(datasets.Dataset.from_list(rows)).__getitems__([0])):
        with pytest.raises(ValueError, match=r"row 0 has 'seq_lengths'.*fastcollate\.trl"):
            fastcollate.DataCollatorWithFlattening()(batch)
    # What the right collator gives for them:
    batch = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(rows)
    assert batch["position_ids"].tolist() == [[0, 1, 0, 1, 2]]


# --- padding-free rows read in place ------------------------------------------------------------

# Cached small ints (read by address) and the whole int64 range.
INT64 = st.one_of(st.integers(-5, 256), st.integers(-(2**63), 2**63 - 1))
ODD_VALUES = [None, "empty", "bool", "past int64", "numpy", "float", "missing"]


@st.composite
def in_place_case(draw):
    """A padding-free batch of exact dicts whose ids, labels and `seq_lengths` are lists or
    tuples of ints, with all, no or some rows holding labels, and at most one odd value in one
    row that the in-place read gives up on (an empty row, a bool, an int past int64, a numpy
    row, a float, a missing key)."""
    labels = draw(st.sampled_from(["all", "none", "some"]))
    packed = draw(st.booleans())
    rows = []
    for _ in range(draw(st.integers(1, 5))):
        length = draw(st.integers(1, 12))
        sequence = draw(st.sampled_from([list, tuple]))
        row = {"input_ids": sequence(draw(st.lists(INT64, min_size=length, max_size=length)))}
        if labels == "all" or (labels == "some" and draw(st.booleans())):
            row["labels"] = sequence(draw(st.lists(INT64, min_size=length, max_size=length)))
        if packed:
            row["seq_lengths"] = sequence(draw(pieces(length)))
        rows.append(row)
    odd = draw(st.sampled_from(ODD_VALUES))
    row = rows[draw(st.integers(0, len(rows) - 1))]
    key = draw(st.sampled_from(sorted(row)))
    if odd == "empty":
        for k in row:
            row[k] = []
    elif odd == "missing":
        del row[key]
    elif odd is not None:
        values = list(row[key])
        at = draw(st.integers(0, len(values) - 1))
        if odd == "numpy":
            row[key] = np.array(values, dtype=np.int64)
        else:
            values[at] = {"bool": True, "past int64": 2**63, "float": float(values[at])}[odd]
            row[key] = values
    event(f"labels={labels} packed={packed} odd={odd}")
    return rows, odd


def outcome(collate, rows):
    """The batch, or the error's type and message."""
    try:
        return collate(rows)
    except (TypeError, ValueError, OverflowError) as error:
        return type(error), str(error)


@SETTINGS
@given(case=in_place_case())
def test_padding_free_rows_read_in_place_same_as_the_general_path_and_trl(case):
    # Exact dicts of lists or tuples of ints are read in place; a dict subclass goes through
    # columns (the general path), which must give the same batch or the same error.
    class Row(dict):
        pass

    rows, odd = case
    before = copy.deepcopy(rows)
    collator = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)
    ours = outcome(collator, rows)
    assert_unchanged(rows, before)
    general = outcome(collator, [Row(row) for row in rows])
    if isinstance(general, dict):
        assert_same_batch(ours, general)
    else:
        assert ours == general
    if odd in (None, "numpy", "missing") and isinstance(ours, dict):
        assert_same_batch(ours, theirs(rows, {"pad_token_id": 0, "padding_free": True}))
    # One native call reads every batch; it takes the strict route exactly when every value
    # read is a non-empty list or tuple of ints and every row has `input_ids` (and
    # `seq_lengths`, when the first row has them): a row without labels takes its input ids.
    packed = "seq_lengths" in rows[0]
    in_place = (
        _native.flatten_batch(
            rows,
            labels=False,
            labels_from_ids=True,
            separator_id=-100,
            position_ids_start=0,
            position_ids=True,
            seq_idx=True,
            cu_seq_lens=True,
            integers_only=True,
            skip_empty=True,
            seq_lengths=packed,
        )
        if isinstance(ours, dict)
        else None
    )
    readable = odd in (None, "missing") and all(
        "input_ids" in row and (not packed or "seq_lengths" in row) for row in rows
    )
    if in_place is not None:
        assert in_place["read_strictly"] == readable
        assert ours["input_ids"].tolist() == in_place["input_ids"].tolist()
    assert_unchanged(rows, before)


# --- padded rows read in place -----------------------------------------------------------------


def _exact_ints(value, length=None):
    """Whether `value` is what the in-place read takes: an exact list or tuple of exact ints in
    the int64 range (of `length` items, when given; at least one otherwise)."""
    return (
        type(value) in (list, tuple)
        and (len(value) == length if length is not None else len(value) > 0)
        and all(type(x) is int and -(2**63) <= x < 2**63 for x in value)
    )


@st.composite
def padded_case(draw):
    """A padded batch as `in_place_case` makes them (lists or tuples of ints, with all, no or
    some rows holding labels, sometimes `seq_lengths`, at most one odd value), plus labels one
    item short in one row now and then, and the padded collator's options."""
    rows, odd = draw(in_place_case())
    if draw(st.booleans()):
        row = draw(st.sampled_from(rows))
        if "labels" in row and len(row["labels"]) > 1:
            row["labels"] = row["labels"][:-1]
            odd = "short labels"
    options = {
        "pad_token_id": draw(st.sampled_from([0, 2, 151643, -1])),
        "return_position_ids": draw(st.booleans()),
        "pad_to_multiple_of": draw(st.sampled_from([None, 1, 4, 8, 64])),
    }
    event(f"odd={odd} position_ids={options['return_position_ids']}")
    return rows, odd, options


@SETTINGS
@given(case=padded_case())
def test_padded_rows_read_in_place_same_as_the_general_path_and_trl(case):
    # Exact dicts of lists or tuples of ints are padded in place by one native call; a dict
    # subclass takes the general path, which must give the same batch or the same error.
    class Row(dict):
        pass

    rows, odd, options = case
    before = copy.deepcopy(rows)
    collator = DataCollatorForLanguageModeling(**options)
    ours = outcome(collator, rows)
    assert_unchanged(rows, before)
    general = outcome(collator, [Row(row) for row in rows])
    if isinstance(general, dict):
        assert_same_batch(ours, general)
    else:
        assert ours == general
    if odd in (None, "numpy", "missing") and isinstance(ours, dict):
        if "seq_lengths" in rows[0] and not all("seq_lengths" in row for row in rows):
            # TRL reads every row's seq_lengths even where it does not use them; a padded batch
            # without position ids does not read them (docs/trl.md, Where it differs).
            assert not options["return_position_ids"]
            with pytest.raises(KeyError, match="seq_lengths"):
                theirs(rows, options)
        else:
            assert_same_batch(ours, theirs(rows, options))
    # The native call's strict route takes the batch exactly when every row's input ids are a
    # non-empty list or tuple of int64 ints and its labels (where present) one of the same
    # length, unless position ids of pre-packed rows are asked for (the first row has
    # `seq_lengths`); its lax route takes any other, in the same call.
    position_ids = options["return_position_ids"]
    readable = not (position_ids and "seq_lengths" in rows[0]) and all(
        _exact_ints(row.get("input_ids"))
        and ("labels" not in row or _exact_ints(row["labels"], len(row["input_ids"])))
        for row in rows
    )
    try:
        native, read_strictly = _native.pad_with_labels(
            rows,
            pad_id=options["pad_token_id"],
            multiple=options["pad_to_multiple_of"],
            position_ids=position_ids,
            to_tensor=torch.from_numpy,
        )
    except (TypeError, ValueError, OverflowError) as error:
        assert not readable
        # The collator refuses it too: in its one native call, or in its row checks before it.
        assert not isinstance(ours, dict), error
    else:
        assert read_strictly == readable
        if readable:
            assert_same_batch(native, ours)
    assert_unchanged(rows, before)


def test_padded_in_place_batch_is_trls_for_mixed_labels_and_tuples():
    # Rows without labels take their input ids; tuples read as lists; the width is rounded up.
    rows = [
        {"input_ids": (5, 6, 7), "labels": [-100, 6, 7]},
        {"input_ids": [8, 9], "completion_mask": [0, 1]},
        {"input_ids": [2**40], "labels": (-(2**63),)},
    ]
    options = {"pad_token_id": 3, "return_position_ids": True, "pad_to_multiple_of": 4}
    ours = DataCollatorForLanguageModeling(**options)(rows)
    assert_same_batch(ours, theirs(rows, options))
    assert ours["labels"].tolist() == [
        [-100, 6, 7, -100],
        [8, 9, -100, -100],
        [-(2**63), -100, -100, -100],
    ]
    assert ours["position_ids"].tolist() == [[0, 1, 2, 0], [0, 1, 0, 0], [0, 0, 0, 0]]
    assert ours["input_ids"].dtype == torch.int64


# --- optional dependency ------------------------------------------------------------------------


def test_without_trl_the_import_says_how_to_install_it():
    done = run_without(
        ["trl"],
        """
        import fastcollate
        try:
            import fastcollate.trl
        except ImportError as err:
            print(err)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "fastcollate.trl needs" in done.stdout
    assert install_command("trl") in done.stdout
