"""The benchmark's floor (`fastcollate.bench.floor`, `_native.PadFloor`): it gives exactly
fastcollate's output for the same rows (so it cannot measure less work than the call does),
refuses what it cannot read with an error naming the key and row, and is reported beside
fastcollate's figures."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import fastcollate
from fastcollate._native import PadFloor
from fastcollate.bench import cli, report, timing, workload
from fastcollate.bench.cases import CASES
from fastcollate.bench.errors import BenchError
from fastcollate.bench.floor import Floor, FloorKeys, floor_rows, with_padding_keys


@pytest.mark.parametrize("fmt", workload.FORMATS)
@pytest.mark.parametrize("batch_size", [1, 3, 17])
def test_the_floor_gives_fastcollates_output(bert_tokenizer, fmt, batch_size):
    rows = workload.as_format(
        workload.classification_rows(np.random.default_rng(batch_size), 2 * batch_size), fmt
    )
    batches = [rows[:batch_size], rows[batch_size:]]
    floor = Floor(with_padding_keys(bert_tokenizer), batches)
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    for index, batch in enumerate(batches):
        ours = collator(batch)
        assert floor.difference(index, ours) is None
        # And value for value, key for key, against the floor's own buffers.
        outputs = floor.native.outputs()
        assert set(outputs) == set(ours) == {
            "input_ids", "token_type_ids", "attention_mask", "labels"
        }  # fmt: skip
        for key, value in outputs.items():
            assert value.dtype == np.int64
            assert np.array_equal(value, ours[key].numpy()), key


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("fmt", workload.FORMATS)
@pytest.mark.parametrize("batch_size", [1, 5])
def test_the_floor_with_outputs_hands_out_the_planned_calls_batch(
    bert_tokenizer, fmt, batch_size, return_tensors
):
    rows = workload.as_format(
        workload.classification_rows(np.random.default_rng(batch_size), batch_size), fmt
    )
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer, return_tensors=return_tensors)
    collator(rows)
    plan = collator._call_plan
    kind = {"lists": None, "numpy": "np"}.get(fmt, "pt")
    floor = Floor(with_padding_keys(bert_tokenizer), [rows], through_torch=True)
    handed = floor.native.pad_handed_out(rows, plan.native_plans[kind])
    ours = collator(rows)
    assert type(handed) is type(ours)  # a BatchEncoding
    assert list(handed.keys()) == list(ours.keys())
    for key in ours:
        assert type(handed[key]) is type(ours[key]), key
        assert handed[key].dtype == ours[key].dtype, key
        assert np.array_equal(np.asarray(handed[key]), np.asarray(ours[key])), key
    # Fresh buffers each call: an earlier batch is not written over.
    again = floor.native.pad_handed_out(rows, plan.native_plans[kind])
    assert again["input_ids"] is not handed["input_ids"]
    if return_tensors == "pt":
        assert again["input_ids"].data_ptr() != handed["input_ids"].data_ptr()
    else:
        assert not np.shares_memory(again["input_ids"], handed["input_ids"])


@pytest.mark.parametrize("fmt", ["torch", "torch-format"])
@pytest.mark.parametrize("batch_size", [1, 3, 17])
def test_the_floor_through_torch_gives_fastcollates_output(bert_tokenizer, fmt, batch_size):
    rows = workload.as_format(
        workload.classification_rows(np.random.default_rng(batch_size), 2 * batch_size), fmt
    )
    batches = [rows[:batch_size], rows[batch_size:]]
    floor = Floor(with_padding_keys(bert_tokenizer), batches, through_torch=True)
    # Handed the tensors themselves, not numpy views of them.
    assert all(type(row["input_ids"]) is torch.Tensor for batch in floor.batches for row in batch)
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    for index, batch in enumerate(batches):
        assert floor.difference(index, collator(batch)) is None


@given(
    rows=st.lists(
        st.lists(st.integers(-(2**31), 2**31 - 1), max_size=12), min_size=1, max_size=6
    ),
    dtype=st.sampled_from(["int64", "int32", "int16", "uint8"]),
)
def test_the_floor_reads_every_integer_tensor_dtype(rows, dtype):
    torch_dtype = getattr(torch, dtype)
    info = torch.iinfo(torch_dtype)
    rows = [[min(max(v, info.min), info.max) for v in r] for r in rows]
    longest = max(len(r) for r in rows)
    floor = PadFloor(["ids"], [-1], None, len(rows), longest)
    floor.pad([{"ids": torch.tensor(r, dtype=torch_dtype)} for r in rows])
    assert np.array_equal(floor.outputs()["ids"], padded(rows, -1))


def test_the_floor_refuses_a_tensor_no_sound_reader_reads_in_place():
    class Subclass(torch.Tensor):
        pass

    floor = PadFloor(["ids"], [0], None, 2, 4)
    negated = torch._neg_view(torch.arange(3))
    for value in [
        negated,
        torch.arange(3).as_subclass(Subclass),
        torch.arange(3).float(),
        torch.ones(1, 2, dtype=torch.int64),
        torch.tensor(3),
    ]:
        with pytest.raises(
            ValueError, match="reads 'ids' in row 1 only as an exact, unnegated 1-d integer"
        ):
            floor.pad([{"ids": [1, 2]}, {"ids": value}])
    two_keys = PadFloor(["ids", "mask"], [0, 0], None, 2, 4)
    with pytest.raises(ValueError, match="reads 'mask' in row 0 only as an exact, unnegated"):
        two_keys.pad([{"ids": torch.arange(2), "mask": negated}])
    assert negated.is_neg()  # the row is left as it was


def test_the_floor_reads_tensors_through_views_of_their_memory():
    tensor = torch.arange(5)
    [row] = floor_rows([{"input_ids": tensor, "label": torch.tensor(1), "n": 3}])
    assert isinstance(row["input_ids"], np.ndarray)
    assert row["input_ids"].ctypes.data == tensor.data_ptr()  # a view, not a copy
    assert row["label"].shape == () and row["n"] == 3


def padded(rows: list[list[int]], pad: int) -> np.ndarray:
    longest = max(len(r) for r in rows)
    out = np.full((len(rows), longest), pad, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


@given(
    rows=st.lists(
        st.lists(st.integers(-(2**63), 2**63 - 1), max_size=12), min_size=1, max_size=6
    ),
    pad=st.integers(-5, 300),
    as_arrays=st.booleans(),
)
def test_every_value_is_read_and_every_pad_written(rows, pad, as_arrays):
    longest = max(len(r) for r in rows)
    floor = PadFloor(["ids"], [pad], None, len(rows) + 2, longest + 3)
    # A first, longer batch leaves other values in the buffers: the second overwrites them all.
    floor.pad([{"ids": list(range(1000, 1000 + longest + 3))} for _ in range(len(rows) + 2)])
    values = [np.asarray(r, dtype=np.int64) if as_arrays else r for r in rows]
    floor.pad([{"ids": v} for v in values])
    out = floor.outputs()
    assert list(out) == ["ids"]
    assert out["ids"].shape == (len(rows), longest)
    assert np.array_equal(out["ids"], padded(rows, pad))


def test_a_floor_that_does_less_work_is_caught(bert_tokenizer):
    rows = workload.classification_rows(np.random.default_rng(0), 4)
    ours = fastcollate.DataCollatorWithPadding(bert_tokenizer)(rows)
    keys = with_padding_keys(bert_tokenizer)
    fewer = dict(keys.padded)
    del fewer["token_type_ids"]
    problem = Floor(FloorKeys(fewer, keys.label), [rows]).difference(0, ours)
    assert problem is not None and "keys" in problem
    no_label = Floor(FloorKeys(keys.padded, None), [rows]).difference(0, ours)
    assert no_label is not None and "keys" in no_label
    other_pad = dict(keys.padded, attention_mask=7)
    problem = Floor(FloorKeys(other_pad, keys.label), [rows]).difference(0, ours)
    assert problem is not None and "'attention_mask'" in problem


def test_a_floor_that_differs_stops_the_run(monkeypatch):
    [case] = [c for c in CASES if c.name == "DataCollatorWithPadding"]

    def fewer_keys(tokenizer):
        keys = with_padding_keys(tokenizer)
        return FloorKeys({"input_ids": keys.padded["input_ids"]}, keys.label)

    monkeypatch.setattr(case, "floor", fewer_keys)
    with pytest.raises(BenchError, match="floor: keys"):
        timing.run(batch_sizes=[2], formats=["lists"], repeat=1, min_seconds=0.0,
                   cases=["DataCollatorWithPadding"], pool_rows=2)  # fmt: skip


@pytest.mark.parametrize(
    "rows, error, message, key, row",
    [
        ([], ValueError, "empty batch", None, None),
        ([{"ids": [1]}, {"other": [1]}], ValueError, "row 1 has no key 'ids'", "ids", 1),
        ([{"ids": [1]}, [1]], TypeError, "row 1 is a list", None, 1),
        ([{"ids": [1, 2.0]}], ValueError, "could not read 'ids' in row 0", None, None),
        ([{"ids": [1, 2**64]}], ValueError, "could not read 'ids' in row 0", None, None),
        ([{"ids": (1, 2)}], ValueError, "'ids' in row 0 as a list of ints", None, None),
        ([{"ids": np.ones(2, np.int32)}], ValueError, "1-d int64 numpy array", None, None),
        ([{"ids": np.ones((1, 2), np.int64)}], ValueError, "1-d int64 numpy array", None, None),
        ([{"ids": "text"}], ValueError, "not a str", None, None),
        ([{"ids": [1, 2, 3, 4, 5]}], ValueError, "at most 4 values, not 5", None, None),
        ([{"ids": [1]}] * 4, ValueError, "hold 3 rows, not 4", None, None),
    ],
)
def test_what_the_floor_cannot_read_is_an_error(rows, error, message, key, row):
    floor = PadFloor(["ids"], [0], None, 3, 4)
    with pytest.raises(error, match=message) as raised:
        floor.pad(rows)
    assert getattr(raised.value, "key", None) == key
    assert getattr(raised.value, "row", None) == row


def test_a_missing_label_and_a_label_that_is_no_int_are_errors():
    floor = PadFloor(["ids"], [0], ("label", "labels"), 2, 2)
    with pytest.raises(ValueError, match="row 1 has no key 'label'"):
        floor.pad([{"ids": [1], "label": 0}, {"ids": [1]}])
    with pytest.raises(TypeError):
        floor.pad([{"ids": [1], "label": "positive"}])


def test_the_buffers_are_sized_by_the_one_sizing_rule():
    with pytest.raises(MemoryError, match="not enough memory for 'ids'"):
        PadFloor(["ids"], [0], None, 2**30, 2**20)
    with pytest.raises(ValueError, match="more than memory can address"):
        PadFloor(["ids"], [0], None, 2**62, 2**62)
    with pytest.raises(ValueError, match="one pad value per key"):
        PadFloor(["ids", "mask"], [0], None, 1, 1)


def test_the_floor_is_reported_beside_fastcollate(tmp_path, capsys):
    path = tmp_path / "floor.json"
    args = ["--quick", "--cases", "WithPadding,ForSeq2Seq", "--batch-sizes", "2", "--formats",
            "lists,torch,torch-format", "--repeat", "1", "--json", str(path)]  # fmt: skip
    assert cli.bench_main(args) == 0
    out = capsys.readouterr().out
    assert "How far from the limit" in out and "fastcollate / floor" in out
    assert "No floor is defined for ForSeq2Seq" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    record = json.loads(path.read_text("utf-8"))
    assert "memcpy" in record["settings"]["basis"]["floor"]["description"]
    for r in record["results"]:
        floor = r["floor"]
        if r["case"] == "DataCollatorWithPadding":
            assert floor["ms_per_batch"] > 0
            ratio = r["ms_per_batch"]["fastcollate"] / floor["ms_per_batch"]
            assert floor["fastcollate_over_floor"] == pytest.approx(ratio)
            assert "floor" not in r["ms_per_batch"]  # not a method, nor a baseline
        else:
            assert floor is None
        torch_floor = r["torch_floor"]
        if r["case"] == "DataCollatorWithPadding" and r["format"] in timing.TORCH_ROWS:
            ratio = r["ms_per_batch"]["fastcollate"] / torch_floor["ms_per_batch"]
            assert torch_floor["fastcollate_over_floor"] == pytest.approx(ratio)
            assert "floor through torch" not in r["ms_per_batch"]
        else:
            assert torch_floor is None
    assert "is_neg()" in record["settings"]["basis"]["torch_floor"]["description"]
    assert "floor through torch" in out


def test_the_floor_table_shows_a_dash_where_a_ratio_is_missing():
    seconds = {"transformers": 1e-3, "fastcollate": 2e-5}
    results = [
        timing.Result("DataCollatorWithPadding", "numpy", 8, seconds, floor_seconds=1e-5),
        timing.Result("DataCollatorWithPadding", "torch", 8, seconds, floor_seconds=1e-5,
                      torch_floor_seconds=1.6e-5),
        timing.Result("DataCollatorForSeq2Seq", "numpy", 8, dict(seconds)),
    ]
    table = report.floor_table(results)
    assert "2.00x" in table and "1.25x" in table and "ForSeq2Seq" in table
    numpy_line = next(line for line in table.splitlines() if line.startswith("numpy"))
    assert numpy_line.split()[-2:] == ["-", "-"]  # no floor through torch for numpy rows
    assert report.floor_table(results[2:]) == ""
    assert results[0].vs_floor == pytest.approx(2.0) and results[2].vs_floor is None
    assert results[0].vs_torch_floor is None
    assert results[1].vs_torch_floor == pytest.approx(1.25)
