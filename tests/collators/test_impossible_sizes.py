"""Sizes that cannot exist: every entry point that takes a `max_length`, a `pad_to_multiple_of`
or a budget, given one no machine can hold, raises `MemoryError` at once, before anything is
reserved or written, with no resource limit in place (the one sizing rule,
`rust/core/sizes.rs`), as transformers does through numpy. Each case checks the error's words
(the rule's own: so the refusal came before any reservation, not from a failed one), that it
came well under a second, and that the process's peak memory barely grew.

The read routes: the whole file runs again with torch's DLPack exchange table off
(`test_again_without_torchs_exchange_table`, a slow test: `-m slow` or CI's full run)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

import datasets
import numpy as np
import pytest
import torch
from transformers import (
    Wav2Vec2CTCTokenizer,
    Wav2Vec2FeatureExtractor,
    Wav2Vec2Processor,
    WhisperFeatureExtractor,
)

import fastcollate
from fastcollate import _native
from fastcollate.arrow import ArrowBatches

# 8 TiB an int64 row: past the memory of any machine these tests run on, well inside the
# address space (where only a bound on memory can refuse it).
HUGE = 2**40
# The rule's words: "... unable to allocate X TiB for an array with shape (...) and data type
# ..., more than the Y GiB this machine has".
RULE = r"unable to allocate .* TiB for an array with shape \(.*\) and data type \w+, more than"
# How much the peak resident memory may grow in one refused call.
GROWTH = 256 << 20
OPTIONS = [
    pytest.param({"padding": "max_length", "max_length": HUGE}, id="max_length"),
    pytest.param({"pad_to_multiple_of": HUGE}, id="pad_to_multiple_of"),
]
FORMATS = ["list", "numpy", "torch"]


def peak_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def assert_refused(call, match: str = RULE) -> MemoryError:
    """`call()` raises MemoryError matching `match` well under a second, and the peak
    resident memory barely grows."""
    before = peak_bytes()
    start = time.perf_counter()
    with pytest.raises(MemoryError, match=match) as info:
        call()
    assert time.perf_counter() - start < 2
    assert peak_bytes() - before < GROWTH
    return info.value


def assert_cheap(call):
    """`call()` (a budget far past the data) runs with little memory, and returns."""
    before = peak_bytes()
    result = call()
    assert peak_bytes() - before < GROWTH
    return result


def ids(values, fmt):
    if fmt == "list":
        return list(values)
    array = np.asarray(values, dtype=np.int64)
    return array if fmt == "numpy" else torch.from_numpy(array)


def token_rows(fmt, labels=False):
    rows = [{"input_ids": ids([101, 7, 8, 102], fmt)}, {"input_ids": ids([101, 9, 102], fmt)}]
    if labels:
        for row in rows:
            row["labels"] = ids(range(len(row["input_ids"])), fmt)
    return rows


# -- token padding -------------------------------------------------------------------------


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("return_tensors", ["np", "pt", None])
def test_pad_with_a_tokenizer(bert_tokenizer, options, fmt, return_tensors):
    err = assert_refused(lambda: fastcollate.pad(
        token_rows(fmt), bert_tokenizer, return_tensors=return_tensors, **options))
    assert "'input_ids'" in str(err) and "(2, 1099511627776)" in str(err)


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_pad_without_a_tokenizer(options, fmt):
    assert_refused(lambda: fastcollate.pad(
        token_rows(fmt), pad_token_id=0, return_tensors="pt", **options))


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_token_collators(bert_tokenizer, options, fmt):
    collators = [
        fastcollate.DataCollatorWithPadding(bert_tokenizer, **options),
        fastcollate.DataCollatorForTokenClassification(bert_tokenizer, **options),
        fastcollate.DataCollatorForSeq2Seq(bert_tokenizer, **options),
    ]
    for collator in collators:
        assert_refused(lambda collator=collator: collator(token_rows(fmt, labels=True)))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mlm", [True, False])
def test_language_modeling(bert_tokenizer, fmt, mlm):
    collator = fastcollate.DataCollatorForLanguageModeling(
        bert_tokenizer, mlm=mlm, pad_to_multiple_of=HUGE)
    assert_refused(lambda: collator(token_rows(fmt)))


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_multiple_choice(bert_tokenizer, options, fmt):
    rows = [{"input_ids": [ids([101, 7, 102], fmt), ids([101, 102], fmt)], "label": 0}] * 2
    collator = fastcollate.DataCollatorForMultipleChoice(bert_tokenizer, **options)
    assert_refused(lambda: collator(rows))


@pytest.mark.parametrize("options", OPTIONS)
def test_arrow_batches(bert_tokenizer, options):
    dataset = datasets.Dataset.from_dict(
        {"input_ids": [[101, 7, 8, 102], [101, 9, 102]], "label": [0, 1]})
    batch = ArrowBatches(dataset).__getitems__([0, 1])
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer, **options)
    assert_refused(lambda: collator(batch))


@pytest.mark.parametrize("options", [
    {"strategy": "max_length", "max_length": HUGE}, {"pad_to_multiple_of": HUGE}])
@pytest.mark.parametrize("fmt", FORMATS)
def test_output_buffer_provider_is_never_asked(options, fmt):
    """Outputs written into buffers a provider gives (the route of `pin_memory=True`): the
    size is refused before the provider is called."""
    asked = []

    def provider(key, shape, dtype):
        asked.append(key)
        return torch.empty(shape, dtype=getattr(torch, dtype))

    group = _native.PadGroup("input_ids", pad_value=0, attention_mask="attention_mask",
                             **options)
    assert_refused(lambda: _native.collate(
        token_rows(fmt), [group], float32=True, to_tensor=torch.from_numpy,
        output_buffer=provider))
    assert asked == []


def machine_bytes() -> int:
    """Total memory plus swap, as the kernel counts them (the rule's bound on Linux)."""
    with open("/proc/meminfo") as meminfo:
        fields = dict(line.split(":", 1) for line in meminfo)
    return sum(int(fields[name].split()[0]) * 1024 for name in ("MemTotal", "SwapTotal"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bound read from the kernel")
@pytest.mark.parametrize("fmt", FORMATS)
def test_outputs_that_fit_one_by_one_but_not_together(fmt):
    """Two outputs of 0.6 of the machine each: the batch is refused as a whole, before the
    provider is asked for the first buffer (a provider that would be asked raises instead of
    allocating, so a regression cannot touch that memory)."""

    def provider(key, shape, dtype):
        raise AssertionError(f"asked for {key} {shape}")

    length = int(machine_bytes() * 0.6) // (2 * 8)
    group = _native.PadGroup("input_ids", pad_value=0, attention_mask="attention_mask",
                             strategy="max_length", max_length=length)
    assert_refused(lambda: _native.collate(
        token_rows(fmt), [group], float32=True, to_tensor=torch.from_numpy,
        output_buffer=provider), match="not enough memory for 'input_ids', 'attention_mask' "
        "together: unable to allocate .*, more than the .* this machine has")


def test_sizes_past_the_address_space_stay_value_errors(bert_tokenizer):
    # What numpy calls "array is too big": no allocation could ever hold it.
    for options in ({"padding": "max_length", "max_length": 2**62},
                    {"pad_to_multiple_of": 2**63}):
        with pytest.raises(ValueError, match="input_ids"):
            fastcollate.pad(token_rows("list"), bert_tokenizer, return_tensors="np", **options)
    with pytest.raises(ValueError, match="more than memory can address"):
        _native.check_output_size("x", (2, -1), 8, "int64")
    with pytest.raises(ValueError, match="more than memory can address"):
        _native.check_output_size("x", (2**40, 2**40), 8, "int64")


def test_the_rule_itself():
    _native.check_output_size("x", (2, 3), 8, "int64")
    _native.check_output_size("x", (0, 2**62), 8, "int64")
    err = assert_refused(lambda: _native.check_output_size("x", (2, HUGE), 8, "int64"))
    assert str(err).startswith(
        "not enough memory for 'x': unable to allocate 16.00 TiB for an array with shape "
        "(2, 1099511627776) and data type int64, more than the ")


# -- feature extractors and the speech collators ---------------------------------------------


def audio_rows(fmt):
    rows = [np.linspace(0, 1, 5, dtype=np.float32), np.linspace(0, 1, 3, dtype=np.float32)]
    if fmt == "list":
        return [{"input_values": row.tolist()} for row in rows]
    if fmt == "torch":
        return [{"input_values": torch.from_numpy(row)} for row in rows]
    return [{"input_values": row} for row in rows]


def wav2vec2():
    return Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0,
                                    do_normalize=False, return_attention_mask=True)


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("return_tensors", ["np", "pt"])
def test_pad_with_a_feature_extractor(options, return_tensors):
    err = assert_refused(lambda: fastcollate.pad(
        audio_rows("numpy"), wav2vec2(), return_tensors=return_tensors, **options))
    assert "'input_values'" in str(err) and "float32" in str(err)


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("fmt", ["list", "torch"])
def test_feature_extractor_rows_as_lists_or_tensors(options, fmt):
    err = assert_refused(lambda: fastcollate.pad(
        audio_rows(fmt), wav2vec2(), return_tensors="np", **options))
    assert "shape (2, 1099511627776) " in str(err)


@pytest.mark.parametrize("options", OPTIONS)
def test_frames_of_features(options):
    extractor = WhisperFeatureExtractor(feature_size=4)
    rows = [{"input_features": np.ones((n, 4), np.float32)} for n in (3, 2)]
    err = assert_refused(lambda: fastcollate.pad(rows, extractor, return_tensors="np", **options))
    assert "shape (2, 1099511627776, 4) " in str(err)


def ctc_processor(tmp_path):
    vocab = tmp_path / "vocab.json"
    vocab.write_text('{"[PAD]": 0, "[UNK]": 1, "|": 2, "a": 3, "b": 4}')
    tokenizer = Wav2Vec2CTCTokenizer(str(vocab), pad_token="[PAD]", unk_token="[UNK]")
    return Wav2Vec2Processor(feature_extractor=wav2vec2(), tokenizer=tokenizer)


@pytest.mark.parametrize("field", ["pad_to_multiple_of", "pad_to_multiple_of_labels"])
def test_ctc_collator(tmp_path, field):
    collator = fastcollate.DataCollatorCTCWithPadding(ctc_processor(tmp_path), **{field: HUGE})
    rows = [{**row, "labels": [3, 4, 3]} for row in audio_rows("numpy")]
    assert_refused(lambda: collator(rows))


# -- TRL -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bool])
@pytest.mark.parametrize("rank", [1, 2])
def test_trl_pad(dtype, rank):
    trl = pytest.importorskip("fastcollate.trl", exc_type=ImportError)
    shape = (lambda n: (n,)) if rank == 1 else (lambda n: (n, 2))
    tensors = [torch.ones(shape(3), dtype=dtype), torch.ones(shape(1), dtype=dtype)]
    err = assert_refused(lambda: trl.pad(tensors, pad_to_multiple_of=HUGE))
    assert "'tensors'" in str(err)


def test_trl_pad_with_mask():
    trl = pytest.importorskip("fastcollate.trl", exc_type=ImportError)
    assert_refused(lambda: trl.pad_with_mask([[1, 2, 3], [4]], pad_to_multiple_of=HUGE))


@pytest.mark.parametrize("padding_free", [False, True])
@pytest.mark.parametrize("fmt", FORMATS)
def test_trl_language_modeling(padding_free, fmt):
    trl = pytest.importorskip("fastcollate.trl", exc_type=ImportError)
    collator = trl.DataCollatorForLanguageModeling(
        pad_token_id=0, padding_free=padding_free, pad_to_multiple_of=HUGE)
    assert_refused(lambda: collator(token_rows(fmt)))


def test_trl_preference_collators():
    trl = pytest.importorskip("fastcollate.trl", exc_type=ImportError)
    paired = [{"prompt_ids": [1, 2, 3], "chosen_ids": [4, 5], "rejected_ids": [6]},
              {"prompt_ids": [7, 8], "chosen_ids": [9], "rejected_ids": [10, 11]}]
    assert_refused(lambda: trl.DataCollatorForPreference(
        pad_token_id=0, pad_to_multiple_of=HUGE)(paired))
    unpaired = [{"prompt_ids": [1, 2], "completion_ids": [3], "label": True},
                {"prompt_ids": [4], "completion_ids": [5, 6], "label": False}]
    assert_refused(lambda: trl.DataCollatorForUnpairedPreference(
        pad_token_id=0, pad_to_multiple_of=HUGE)(unpaired))
    reward = [{"chosen_ids": [1, 2], "rejected_ids": [3]}, {"chosen_ids": [4], "rejected_ids": [5]}]
    assert_refused(lambda: trl.RewardDataCollatorForPreference(
        pad_token_id=0, pad_to_multiple_of=HUGE)(reward))


@pytest.mark.parametrize("strategy", ["bfd", "wrapped"])
def test_pack_dataset_with_a_huge_seq_length_reserves_nothing_by_it(strategy):
    trl = pytest.importorskip("fastcollate.trl", exc_type=ImportError)
    dataset = datasets.Dataset.from_dict({"input_ids": [[1, 2, 3], [4, 5], [6]]})
    packed = assert_cheap(lambda: trl.pack_dataset(dataset, HUGE, strategy))
    assert sorted(sum(packed["input_ids"], [])) == [1, 2, 3, 4, 5, 6]


# -- budgets ---------------------------------------------------------------------------------


def test_packing_budgets_reserve_nothing_by_them():
    lengths = [3, 5, 2, 7]
    batches = assert_cheap(lambda: list(fastcollate.PackedBatchSampler(lengths, HUGE, seed=0)))
    assert sorted(i for batch in batches for i in batch) == [0, 1, 2, 3]
    rows = [{"input_ids": [1] * n} for n in lengths]
    streamed = assert_cheap(lambda: list(fastcollate.PackedStream(rows, HUGE, buffer=4, seed=0)))
    assert sum(len(batch) for batch in streamed) == 4


# -- the other read route --------------------------------------------------------------------


# Re-runs this whole file in a child process (under the profile this run has): slow, as
# test_read_paths' own re-run is.
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    os.environ.get("FASTCOLLATE_DLPACK_EXCHANGE") == "0", reason="this is the run it starts"
)
def test_again_without_torchs_exchange_table(request):
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         f"--hypothesis-profile={request.config.getoption('hypothesis_profile') or 'default'}",
         __file__],
        env={**os.environ, "FASTCOLLATE_DLPACK_EXCHANGE": "0"},
        capture_output=True, text=True, timeout=900, check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bound read from the kernel")
@pytest.mark.parametrize(("entry", "masks"), [
    ("pad", "none"), ("pad", "int32"), ("pad", "int64"), ("collator", "none"),
    ("processor", "int64"),
    ("ctc", "none"),  # the CTC collator pads the values alone: its mask is always made
])
def test_feature_extractor_values_and_mask_are_checked_together(tmp_path, entry, masks):
    """Values and attention mask that fit one by one but not together: MemoryError naming both
    before either is reserved, on every feature-extractor entry point, as the token path
    refuses them (test_outputs_that_fit_one_by_one_but_not_together). Run in a child whose
    address space is capped (tests/support/frame_sizes_together.py), so that a regression
    fails a reservation instead of filling the machine."""
    import json

    from tests.support.repository import child_env

    vocab = tmp_path / "vocab.json"
    vocab.write_text('{"[PAD]": 0, "[UNK]": 1, "|": 2, "a": 3, "b": 4}')
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.frame_sizes_together", entry, masks, str(vocab)],
        capture_output=True, text=True, env=child_env(), timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["error"] == "MemoryError", report
    assert report["message"].startswith(
        "not enough memory for 'input_values', 'attention_mask' together: unable to allocate "
    ), report
