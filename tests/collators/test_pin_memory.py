"""`pin_memory=True`: batches returned in page-locked host memory. Without CUDA it raises
before padding anything; the default (False) output is what it always was. The tests marked
`cuda` run only where a GPU is present."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

import fastcollate
from fastcollate._internal.tensors import pin_tensors
from fastcollate.integrations.trainer import pins_in_collator
from tests.support.hypothesis_profiles import examples

CUDA = torch.cuda.is_available()
cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
no_cuda = pytest.mark.skipif(CUDA, reason="checks the error raised without CUDA")

ROWS = [
    {"input_ids": [101, 7, 8, 102], "label": 1},
    {"input_ids": [101, 9, 102], "label": 0},
]


@no_cuda
def test_collator_refuses_pin_memory_without_cuda_at_construction(bert_tokenizer):
    with pytest.raises(RuntimeError, match=r"pin_memory=True needs CUDA"):
        fastcollate.DataCollatorWithPadding(bert_tokenizer, pin_memory=True)


@no_cuda
def test_pad_refuses_pin_memory_without_cuda_before_padding():
    rows = [dict(row) for row in ROWS]
    with pytest.raises(RuntimeError, match=r"pin_memory=True needs CUDA"):
        fastcollate.pad(rows, pad_token_id=0, return_tensors="pt", pin_memory=True)
    assert rows == ROWS


def test_pin_memory_needs_torch_tensors(bert_tokenizer):
    # Checked before CUDA, so it says the same on every machine.
    with pytest.raises(ValueError, match=r"pin_memory=True needs return_tensors='pt'"):
        fastcollate.DataCollatorWithPadding(bert_tokenizer, return_tensors="np", pin_memory=True)
    with pytest.raises(ValueError, match=r"pin_memory=True needs return_tensors='pt'"):
        fastcollate.pad(ROWS, pad_token_id=0, return_tensors=None, pin_memory=True)


def test_default_output_is_unchanged(bert_tokenizer):
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    assert collator.pin_memory is False
    explicit = fastcollate.DataCollatorWithPadding(bert_tokenizer, pin_memory=False)
    theirs = transformers.DataCollatorWithPadding(bert_tokenizer)(ROWS)
    batch, same = collator(ROWS), explicit(ROWS)
    assert list(batch) == list(same) == list(theirs)
    for key in batch:
        assert torch.equal(batch[key], same[key])
        assert torch.equal(batch[key], theirs[key])
        assert batch[key].dtype == theirs[key].dtype
        assert not batch[key].is_pinned()
    # Still the native buffer, shared with numpy (no copy).
    native = fastcollate.pad(ROWS, pad_token_id=0, return_tensors="np")
    shared = torch.from_numpy(native["input_ids"])
    assert shared.data_ptr() == native["input_ids"].__array_interface__["data"][0]


def _pin_in_collate_fn(rows):
    return pin_tensors({"input_ids": torch.tensor(rows)})


@pytest.mark.multiprocess
def test_pinning_in_a_dataloader_worker_raises():
    loader = DataLoader(
        [[1, 2], [3, 4]], batch_size=2, num_workers=1, collate_fn=_pin_in_collate_fn
    )
    with pytest.raises(RuntimeError, match=r"cannot pin in a DataLoader worker"):
        next(iter(loader))


def _args(pin=True, workers=0):
    return types.SimpleNamespace(dataloader_pin_memory=pin, dataloader_num_workers=workers)


def test_trainer_pins_in_the_collator_only_when_it_can(bert_tokenizer):
    ours = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    assert pins_in_collator(_args(), ours, cuda_available=True)
    assert not pins_in_collator(_args(), ours, cuda_available=False)
    assert not pins_in_collator(_args(pin=False), ours, cuda_available=True)
    assert not pins_in_collator(_args(workers=2), ours, cuda_available=True)
    numpy_out = fastcollate.DataCollatorWithPadding(bert_tokenizer, return_tensors="np")
    assert not pins_in_collator(_args(), numpy_out, cuda_available=True)
    assert not pins_in_collator(_args(), fastcollate.default_data_collator, cuda_available=True)


@no_cuda
def test_trainer_without_cuda_keeps_transformers_dataloader(bert_tokenizer, model_path, tmp_path):
    import datasets

    train = datasets.Dataset.from_list(
        [{"input_ids": [101, 7, 102], "label": 0}, {"input_ids": [101, 8, 9, 102], "label": 1}]
    )
    args = transformers.TrainingArguments(
        str(tmp_path), per_device_train_batch_size=2, report_to=[]
    )
    pin = args.dataloader_pin_memory
    # From the config alone (random weights): the GPU session sends the tokenizer, not weights.
    config = transformers.AutoConfig.from_pretrained(model_path)
    model = transformers.AutoModelForSequenceClassification.from_config(config)
    trainer = fastcollate.Trainer(model, args, train_dataset=train, processing_class=bert_tokenizer)
    theirs = transformers.Trainer(model, args, train_dataset=train, processing_class=bert_tokenizer)
    loader = trainer.get_train_dataloader()
    assert theirs.get_train_dataloader().pin_memory == pin
    # Without an accelerator torch pins nothing (and warns when asked): fastcollate does not ask.
    assert loader.pin_memory == (pin and torch.accelerator.is_available())
    assert args.dataloader_pin_memory == pin
    assert trainer.data_collator.pin_memory is False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = next(iter(loader))
    assert not [w for w in caught if "pin_memory" in str(w.message)]
    assert not batch["input_ids"].is_pinned()


@cuda
def test_pinned_batch_equals_the_unpinned_one(bert_tokenizer):
    batch = fastcollate.DataCollatorWithPadding(bert_tokenizer)(ROWS)
    pinned = fastcollate.DataCollatorWithPadding(bert_tokenizer, pin_memory=True)(ROWS)
    assert list(pinned) == list(batch)
    for key in batch:
        assert pinned[key].is_pinned()
        assert torch.equal(pinned[key], batch[key])
        assert torch.equal(pinned[key].to("cuda", non_blocking=True).cpu(), batch[key])
    one = fastcollate.pad(ROWS[0], pad_token_id=0, return_tensors="pt", pin_memory=True)
    assert one["input_ids"].is_pinned()
    assert np.array_equal(one["input_ids"].numpy(), ROWS[0]["input_ids"])


@cuda
def test_trainer_on_a_gpu_pins_in_the_collator(bert_tokenizer, model_path, tmp_path):
    import datasets

    train = datasets.Dataset.from_list(
        [{"input_ids": [101, 7, 102], "label": 0}, {"input_ids": [101, 8, 9, 102], "label": 1}]
    )
    args = transformers.TrainingArguments(
        str(tmp_path), per_device_train_batch_size=2, report_to=[]
    )
    # From the config alone (random weights): the GPU session sends the tokenizer, not weights.
    config = transformers.AutoConfig.from_pretrained(model_path)
    model = transformers.AutoModelForSequenceClassification.from_config(config)
    trainer = fastcollate.Trainer(model, args, train_dataset=train, processing_class=bert_tokenizer)
    loader = trainer.get_train_dataloader()
    assert loader.pin_memory is False
    assert args.dataloader_pin_memory is True  # restored
    assert trainer.data_collator.pin_memory is False
    batch = next(iter(loader))
    assert batch["input_ids"].device.type == "cuda"  # accelerate moved it; the host copy was pinned


# Output buffers: the native module pads straight into tensors a provider gives. On a machine
# without CUDA the same path is checked with ordinary memory (`PinnedOutputBuffers.pin_memory`
# off, CUDA reported present), so the CPU suite proves the values and the absence of a copy.

GROUP = dict(pad_value=0, followers=[("token_type_ids", 0, True)], attention_mask="attention_mask")


def _group(**changes):
    return fastcollate._native.PadGroup("input_ids", **{**GROUP, **changes})


class Provider:
    """An output-buffer provider over ordinary memory that records what it made."""

    def __init__(self, make=None):
        self.made: dict[str, torch.Tensor] = {}
        self.make = make

    def __call__(self, key, shape, dtype):
        assert isinstance(shape, tuple) and all(type(n) is int for n in shape)
        tensor = (
            self.make(key, shape, dtype) if self.make is not None
            else torch.empty(shape, dtype=getattr(torch, dtype))
        )
        self.made[key] = tensor
        return tensor


def _collate(rows, group=None, **options):
    group = _group() if group is None else group
    return fastcollate._native.collate(
        rows, [group], float32=True, to_tensor=torch.from_numpy, **options
    )


def _rows(kind, lengths, extra):
    def ids(n, start):
        values = [start + i for i in range(n)]
        if kind == "list":
            return values
        if kind == "tuple":
            return tuple(values)
        array = np.asarray(values, dtype=np.int64)
        return array if kind == "numpy" else torch.from_numpy(array)

    rows = []
    for row, n in enumerate(lengths):
        item = {"input_ids": ids(n, 100 * row + 1), "token_type_ids": ids(n, 0)}
        if extra == "int_label":
            item["label"] = row % 3
        elif extra == "float_label":
            item["label"] = row + 0.5
        elif extra == "float_ids":
            # A float in the last row: the in-place padding gives up after taking its buffers,
            # and the general path pads to float32 (a new buffer of another dtype).
            if row == len(lengths) - 1 and kind == "list":
                item["input_ids"] = [float(v) for v in item["input_ids"]]
        elif extra == "stacked":
            item["pixel"] = [float(row), 2.0]
        rows.append(item)
    return rows


@pytest.mark.parametrize("kind", ["list", "tuple", "numpy", "torch"])
@pytest.mark.parametrize("extra", ["int_label", "float_label", "float_ids", "stacked"])
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("lengths", [[3, 1, 4], [2], [5, 5], [1, 0, 2]])
def test_output_buffers_are_filled_in_place(kind, extra, left, lengths):
    group = _group(left=left)
    rows = _rows(kind, lengths, extra)
    expected = _collate(rows, group)
    provider = Provider()
    batch = _collate(rows, group, output_buffer=provider)
    assert list(batch) == list(expected)
    for key, value in expected.items():
        assert batch[key].dtype == value.dtype, key
        assert batch[key].shape == value.shape, key
        assert torch.equal(batch[key], value), key
        # The provider's tensor itself: filled in place, no copy.
        assert batch[key] is provider.made[key], key
        assert batch[key].data_ptr() == provider.made[key].data_ptr()


def test_output_buffers_at_max_length_and_multiple_of():
    rows = [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}]
    PadGroup = fastcollate._native.PadGroup
    for group in (
        PadGroup("input_ids", pad_value=0, strategy="max_length", max_length=6,
                 attention_mask="attention_mask"),
        PadGroup("input_ids", pad_value=9, pad_to_multiple_of=4, left=True,
                 attention_mask="attention_mask"),
        PadGroup("input_ids", pad_value=0, strategy="do_not_pad"),
    ):
        if group.strategy == "do_not_pad":
            rows_now = [{"input_ids": [1, 2]}, {"input_ids": [3, 4]}]
        else:
            rows_now = rows
        expected = _collate(rows_now, group)
        provider = Provider()
        batch = _collate(rows_now, group, output_buffer=provider)
        for key, value in expected.items():
            assert torch.equal(batch[key], value) and batch[key].dtype == value.dtype, key
            assert batch[key] is provider.made[key]


def _pinned_on_cpu(monkeypatch):
    """`pin_memory=True` on this machine: CUDA reported present, buffers in ordinary memory,
    and `Tensor.pin_memory` (the copy left for keys the native module does not fill) counted."""
    from fastcollate._internal import tensors

    copies = []

    def pin_copy(self):
        copies.append(self)
        return self.clone()

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(tensors.PinnedOutputBuffers, "pin_memory", False)
    monkeypatch.setattr(torch.Tensor, "pin_memory", pin_copy)
    made = []
    original_call = tensors.PinnedOutputBuffers.__call__

    def recording_call(self, key, shape, dtype):
        tensor = original_call(self, key, shape, dtype)
        made.append(tensor)
        return tensor

    monkeypatch.setattr(tensors.PinnedOutputBuffers, "__call__", recording_call)
    return made, copies


@pytest.mark.parametrize("kind", ["list", "numpy", "torch"])
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("options", [{}, {"padding": "max_length", "max_length": 12},
                                     {"pad_to_multiple_of": 8}])
def test_pinned_collator_fills_its_buffers_like_transformers(
    bert_tokenizer, monkeypatch, kind, padding_side, options
):
    from tests.support.compare import assert_same_batch, to_format

    tokenizer = bert_tokenizer
    monkeypatch.setattr(tokenizer, "padding_side", padding_side)
    texts = ["a short one", "a somewhat longer sentence than that", "mid length text"]
    rows = []
    for i, text in enumerate(texts):
        encoded = tokenizer(text)
        row = {key: to_format(values, kind, np.int64) for key, values in encoded.items()}
        row["label"] = i % 2
        rows.append(row)
    theirs = transformers.DataCollatorWithPadding(tokenizer, **options)(rows)
    made, copies = _pinned_on_cpu(monkeypatch)
    collator = fastcollate.DataCollatorWithPadding(tokenizer, pin_memory=True, **options)
    ours = collator(rows)
    assert_same_batch(ours, theirs)
    addresses = {tensor.data_ptr() for tensor in made}
    assert {value.data_ptr() for value in ours.values()} == addresses
    assert len(made) == len(ours)
    assert copies == []  # every key padded straight into its buffer


def test_pinned_pad_of_one_example_and_of_a_mapping(monkeypatch):
    made, copies = _pinned_on_cpu(monkeypatch)
    one = fastcollate.pad({"input_ids": [5, 6, 7]}, pad_token_id=0, return_tensors="pt",
                          pin_memory=True)
    assert one["input_ids"].tolist() == [5, 6, 7]
    assert one["attention_mask"].tolist() == [1, 1, 1]
    assert {t.data_ptr() for t in one.values()} == {t.data_ptr() for t in made}
    columns = {"input_ids": [[1, 2], [3]], "label": [0, 1]}
    batch = fastcollate.pad(columns, pad_token_id=0, return_tensors="pt", pin_memory=True)
    assert batch["input_ids"].tolist() == [[1, 2], [3, 0]]
    assert batch["label"].tolist() == [0, 1]
    assert copies == []


def test_keys_converted_in_python_are_still_pinned_by_a_copy(monkeypatch):
    # A numpy value beside list token ids is left to BatchEncoding, as tokenizer.pad leaves
    # it: that key is made in Python and pinned by a copy; the padded keys are filled.
    made, copies = _pinned_on_cpu(monkeypatch)
    rows = [{"input_ids": [1, 2, 3], "extra": np.array([1.5, 2.5], dtype=np.float32)},
            {"input_ids": [4], "extra": np.array([3.5, 4.5], dtype=np.float32)}]
    batch = fastcollate.pad(rows, pad_token_id=0, return_tensors="pt", pin_memory=True)
    assert batch["extra"].tolist() == [[1.5, 2.5], [3.5, 4.5]]
    assert batch["input_ids"].data_ptr() in {t.data_ptr() for t in made}
    assert len(copies) == 1


def test_pinned_pad_in_a_dataloader_worker_raises_before_padding(monkeypatch):
    from fastcollate._internal import tensors

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr("torch.utils.data.get_worker_info", lambda: object())
    called = []
    monkeypatch.setattr(tensors.PinnedOutputBuffers, "__call__", lambda *a: called.append(a))
    with pytest.raises(RuntimeError, match=r"cannot pin in a DataLoader worker"):
        fastcollate.pad(ROWS, pad_token_id=0, return_tensors="pt", pin_memory=True)
    assert called == []


def _strided(key, shape, dtype):
    wide = torch.empty((shape[0], shape[-1] * 2) if len(shape) == 2 else (shape[0] * 2,),
                       dtype=getattr(torch, dtype))
    return wide[:, ::2] if len(shape) == 2 else wide[::2]


class _Subclass(torch.Tensor):
    pass


BAD_PROVIDERS = {
    "wrong dtype": (lambda k, s, d: torch.empty(s, dtype=torch.float64), r"another dtype"),
    "wrong size": (lambda k, s, d: torch.empty((s[0] + 1, *s[1:]), dtype=getattr(torch, d)),
                   r"shape"),
    "non-contiguous": (_strided, r"non-contiguous"),
    "numpy memory (may be read-only)": (
        lambda k, s, d: torch.from_numpy(np.zeros(s, dtype=d)), r"did not allocate"),
    "read-only buffer": (
        lambda k, s, d: torch.frombuffer(bytes(8 * int(np.prod(s))), dtype=torch.int64).view(s),
        r"did not allocate"),
    "not a tensor": (lambda k, s, d: np.zeros(s, dtype=d), r"ndarray, not an exact torch.Tensor"),
    "a tensor subclass": (lambda k, s, d: torch.empty(s, dtype=getattr(torch, d)).as_subclass(
        _Subclass), r"_Subclass, not an exact torch.Tensor"),
    "not on the CPU": (lambda k, s, d: torch.empty(s, dtype=getattr(torch, d), device="meta"),
                       r"cannot describe"),
    "raises": (lambda k, s, d: 1 / 0, r"could not be made: ZeroDivisionError"),
}


@pytest.mark.filterwarnings("ignore:The given buffer is not writable")
@pytest.mark.parametrize("name", list(BAD_PROVIDERS))
@pytest.mark.parametrize("kind", ["list", "numpy", "torch"])
def test_bad_output_buffers_raise_naming_the_key(name, kind):
    import copy

    from tests.support.compare import assert_unchanged

    make, message = BAD_PROVIDERS[name]
    rows = _rows(kind, [3, 2], "int_label")
    before = copy.deepcopy(rows)
    with pytest.raises(ValueError, match=r"output buffer .*'input_ids'.*" + message):
        _collate(rows, output_buffer=Provider(make))
    assert_unchanged(rows, before)


def test_a_bad_buffer_for_a_later_key_is_named():
    def make(key, shape, dtype):
        if key == "label":
            return torch.empty((shape[0] + 1,), dtype=getattr(torch, dtype))
        return torch.empty(shape, dtype=getattr(torch, dtype))

    for extra in ("int_label", "float_label"):
        with pytest.raises(ValueError, match=r"output buffer given for 'label' is .*shape"):
            _collate(_rows("list", [3, 2], extra), output_buffer=Provider(make))


def test_two_keys_cannot_share_a_buffer():
    shared = torch.empty(64, dtype=torch.int64)

    def make(key, shape, dtype):
        return shared[: int(np.prod(shape))].view(shape)

    with pytest.raises(ValueError, match=r"'token_type_ids' is memory shared with another"):
        _collate(_rows("list", [3, 2], None), output_buffer=Provider(make))


def test_without_the_exchange_table_the_provider_is_not_called():
    import os
    import subprocess
    import sys

    script = (
        "import torch, fastcollate\n"
        "called = []\n"
        "def provider(*args):\n"
        "    called.append(args)\n"
        "    return torch.empty(args[1], dtype=getattr(torch, args[2]))\n"
        "group = fastcollate._native.PadGroup('input_ids', pad_value=0,"
        " attention_mask='attention_mask')\n"
        "out = fastcollate._native.collate([{'input_ids': [1, 2]}, {'input_ids': [3]}], [group],"
        " float32=True, to_tensor=torch.from_numpy, output_buffer=provider)\n"
        "assert called == [], called\n"
        "assert out['input_ids'].tolist() == [[1, 2], [3, 0]], out\n"
        "print('ok')\n"
    )
    env = dict(os.environ, FASTCOLLATE_DLPACK_EXCHANGE="0")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@settings(max_examples=examples(60), deadline=None)
@given(
    kind=st.sampled_from(["list", "tuple", "numpy", "torch"]),
    lengths=st.lists(st.integers(0, 9), min_size=1, max_size=6),
    extra=st.sampled_from([None, "int_label", "float_label", "float_ids", "stacked"]),
    left=st.booleans(),
    multiple=st.sampled_from([None, 1, 4]),
    mask=st.booleans(),
)
def test_output_buffers_match_owned_outputs(kind, lengths, extra, left, multiple, mask):
    group = _group(pad_to_multiple_of=multiple, left=left, followers=[("token_type_ids", 7, True)],
                   attention_mask="attention_mask" if mask else None)
    rows = _rows(kind, lengths, extra)
    try:
        expected = _collate(rows, group)
    except ValueError:
        with pytest.raises(ValueError):
            _collate(rows, group, output_buffer=Provider())
        return
    provider = Provider()
    batch = _collate(rows, group, output_buffer=provider)
    assert list(batch) == list(expected)
    for key, value in expected.items():
        assert batch[key] is provider.made[key], key
        assert batch[key].dtype == value.dtype and batch[key].shape == value.shape, key
        assert torch.equal(batch[key], value), key


def test_pinned_batches_from_arrow_are_filled_in_place(bert_tokenizer, monkeypatch):
    import datasets

    from tests.support.compare import assert_same_batch

    rows = [{"input_ids": [101, 7, 8, 102], "label": 1}, {"input_ids": [101, 9, 102], "label": 0},
            {"input_ids": [101, 102], "label": 1}]
    dataset = datasets.Dataset.from_list(rows)
    batches = fastcollate.ArrowBatches(dataset)
    theirs = transformers.DataCollatorWithPadding(bert_tokenizer)(rows)
    made, copies = _pinned_on_cpu(monkeypatch)
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer, pin_memory=True)
    loader = DataLoader(batches, batch_size=3, collate_fn=collator)
    ours = next(iter(loader))
    assert_same_batch(ours, theirs)
    assert {value.data_ptr() for value in ours.values()} == {t.data_ptr() for t in made}
    assert copies == []


def test_the_pinned_output_bench_runs_and_records_every_route(tmp_path):
    import importlib.util
    import json

    from tests.support.repository import ROOT

    script = ROOT / "benches" / "bench_pinned_output.py"
    spec = importlib.util.spec_from_file_location("bench_pinned_output", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    record_path = tmp_path / "pinned.json"
    bench.main(["--batch-sizes", "2,3", "--formats", "lists,numpy", "--repeat", "1",
                "--min-seconds", "0.001", "--memory", "ordinary", "--json", str(record_path)])
    record = json.loads(record_path.read_text())
    assert record["environment"]["memory"] == "ordinary"
    assert [(r["format"], r["batch_size"]) for r in record["results"]] == [
        ("lists", 2), ("numpy", 2), ("lists", 3), ("numpy", 3)]
    for result in record["results"]:
        assert set(result["seconds"]) == {"owned", "pad_then_copy", "provider"}
        assert result["output_bytes"] > 0
