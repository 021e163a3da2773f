"""DataCollatorForLanguageModeling's native masking (the default, mask_rng="native") with the
real BERT tokenizer: its rates against the probabilities (bands from binomial standard errors),
uniform random ids (chi-square), whole-word selection, special tokens and padding, labels,
seeding, per-position selection rates against transformers' own masking, structure against
transformers' collator, subclasses, patch_transformers(), and a short real MLM fine-tune."""

from __future__ import annotations

import copy
import multiprocessing
import sys
import types
import warnings

import datasets
import numpy as np
import pytest
import torch
import transformers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoModelForMaskedLM, TrainingArguments

import fastcollate
from tests.support.compare import assert_same_batch
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.parity

SETTINGS = settings(
    max_examples=examples(50),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
FORMATS = ("list", "numpy", "torch")
MASK_ID, PAD_ID, CLS_ID, SEP_ID = 103, 0, 101, 102
# Bands: |observed - expected| within this many binomial standard errors. Each test's checks
# together fail by chance about once in a million runs or less.
Z = 5.0

WORDS = (
    "the quick brown fox jumps over a lazy dog while seven small birds sing loudly in an "
    "unbelievably tokenization supercalifragilistic interchangeable collators garden"
).split()


def sentences(count: int, seed: int = 0, longest: int = 29) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(2, longest + 1))) for _ in range(count)]


def to_format(values, fmt):
    if fmt == "list":
        return list(values)
    array = np.asarray(values, dtype=np.int64)
    return array if fmt == "numpy" else torch.from_numpy(array)


@pytest.fixture(scope="module")
def encoded(bert_tokenizer):
    """64 tokenized sentences of 2 to 29 words (some split into several word pieces)."""
    return bert_tokenizer(sentences(64), return_special_tokens_mask=True)


def rows_of(encoded, fmt="list", keys=("input_ids", "attention_mask")):
    return [
        {key: to_format(encoded[key][i], fmt) for key in keys}
        for i in range(len(encoded["input_ids"]))
    ]


def assert_within(observed: int, trials: int, p: float, what: str):
    expected = trials * p
    sd = max((trials * p * (1 - p)) ** 0.5, 1.0)
    assert abs(observed - expected) <= Z * sd, (
        f"{what}: {observed} of {trials}, expected {expected:.1f} +- {sd:.1f}"
    )


def as_numpy(value):
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def unmasked(batch):
    """The padded ids before masking: the label where one was set, else the input id."""
    ids, labels = as_numpy(batch["input_ids"]), as_numpy(batch["labels"])
    return np.where(labels != -100, labels, ids)


def tally(collator, rows, batches, vocab_size):
    """Counts over `batches` calls on the same rows, checking every position's label."""
    counts = dict.fromkeys(("maskable", "selected", "mask", "random", "kept"), 0)
    for _ in range(batches):
        batch = collator(copy.deepcopy(rows))
        ids, labels = as_numpy(batch["input_ids"]), as_numpy(batch["labels"])
        original = unmasked(batch)
        special = np.isin(original, [PAD_ID, CLS_ID, SEP_ID, MASK_ID, 100])
        selected = labels != -100
        assert not (selected & special).any(), "a special token or padding was selected"
        assert (ids[~selected] == original[~selected]).all(), "an unselected token changed"
        assert (ids >= 0).all() and (ids < vocab_size).all()
        counts["maskable"] += int((~special).sum())
        counts["selected"] += int(selected.sum())
        counts["mask"] += int((selected & (ids == MASK_ID)).sum())
        counts["kept"] += int((selected & (ids == original)).sum())
        counts["random"] += int((selected & (ids != MASK_ID) & (ids != original)).sum())
    return counts


@pytest.mark.parametrize(
    ("mlm_probability", "mask_replace_prob", "random_replace_prob"),
    [(0.15, 0.8, 0.1), (0.3, 0.5, 0.4), (0.15, 0.0, 1.0), (0.5, 1.0, 0.0), (0.15, 0.5, 0.0)],
)
@pytest.mark.parametrize(
    ("fmt", "return_tensors"), [("list", "pt"), ("numpy", "np"), ("torch", "pt")]
)
def test_rates_match_the_probabilities(
    bert_tokenizer,
    encoded,
    mlm_probability,
    mask_replace_prob,
    random_replace_prob,
    fmt,
    return_tensors,
):
    collator = fastcollate.DataCollatorForLanguageModeling(
        bert_tokenizer,
        mlm_probability=mlm_probability,
        mask_replace_prob=mask_replace_prob,
        random_replace_prob=random_replace_prob,
        return_tensors=return_tensors,
        seed=1,
    )
    vocab = len(bert_tokenizer)
    counts = tally(collator, rows_of(encoded, fmt), 150, vocab)
    assert_within(counts["selected"], counts["maskable"], mlm_probability, "selected")
    random_share = 0.0 if mask_replace_prob == 1 else random_replace_prob
    # A random id is the mask id or the original 1 time in `vocab` each.
    hit = random_share / vocab
    assert_within(counts["mask"], counts["selected"], mask_replace_prob + hit, "[MASK]")
    assert_within(counts["random"], counts["selected"], random_share - 2 * hit, "random")
    assert_within(
        counts["kept"],
        counts["selected"],
        1 - mask_replace_prob - random_share + hit,
        "kept",
    )


def test_random_ids_cover_the_vocabulary_uniformly(bert_tokenizer, encoded):
    collator = fastcollate.DataCollatorForLanguageModeling(
        bert_tokenizer, mlm_probability=1.0, mask_replace_prob=0.0, random_replace_prob=1.0, seed=5
    )
    vocab = len(bert_tokenizer)
    rows = rows_of(encoded)
    draws = []
    while sum(len(d) for d in draws) < 12 * vocab:
        batch = collator(rows)
        selected = batch["labels"] != -100
        draws.append(batch["input_ids"][selected].numpy())
    draws = np.concatenate(draws)
    counts = np.bincount(draws, minlength=vocab)
    assert counts.size == vocab, "an id outside range(len(tokenizer))"
    expected = draws.size / vocab
    chi_square = float(((counts - expected) ** 2 / expected).sum())
    dof = vocab - 1
    # Chi-square with ~30k degrees of freedom is close to normal: mean dof, sd sqrt(2 dof).
    assert abs(chi_square - dof) < Z * (2 * dof) ** 0.5, chi_square
    # Coarse bins catch a smooth bias (e.g. towards low ids) that the fine test could miss.
    coarse = np.add.reduceat(counts, np.arange(0, vocab, vocab // 50)[:50])
    widths = np.diff(np.append(np.arange(0, vocab, vocab // 50)[:50], vocab))
    coarse_expected = draws.size * widths / vocab
    coarse_chi = float(((coarse - coarse_expected) ** 2 / coarse_expected).sum())
    assert coarse_chi < 49 + Z * (2 * 49) ** 0.5, coarse_chi


def whole_word_rows(tokenizer, texts):
    encoded = tokenizer(
        texts,
        return_offsets_mapping=True,
        padding="max_length",
        truncation=True,
        max_length=48,
    )
    rows = [{k: encoded[k][i] for k in encoded} for i in range(len(texts))]
    return rows, [encoded.word_ids(i) for i in range(len(texts))]


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
def test_whole_word_masking_selects_whole_words(bert_tokenizer, return_tensors):
    rows, word_ids = whole_word_rows(bert_tokenizer, sentences(32, seed=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Setting mask_replace_prob to 1"
        collator = fastcollate.DataCollatorForLanguageModeling(
            bert_tokenizer,
            whole_word_mask=True,
            mlm_probability=0.3,
            seed=2,
            return_tensors=return_tensors,
        )
    words = selected_words = 0
    for _ in range(60):
        batch = collator(copy.deepcopy(rows))
        labels, ids = as_numpy(batch["labels"]), as_numpy(batch["input_ids"])
        for row, row_word_ids in enumerate(word_ids):
            by_word: dict[int, set] = {}
            for position, word in enumerate(row_word_ids):
                selected = labels[row, position] != -100
                if word is None:  # [CLS], [SEP], padding
                    assert not selected
                    continue
                by_word.setdefault(word, set()).add(bool(selected))
                if selected:
                    assert ids[row, position] == MASK_ID
                    assert labels[row, position] == rows[row]["input_ids"][position]
            assert all(len(flags) == 1 for flags in by_word.values()), "a word was split"
            words += len(by_word)
            selected_words += sum(flags == {True} for flags in by_word.values())
    assert_within(selected_words, words, 0.3, "whole words selected")
    assert "offset_mapping" not in batch


def test_whole_word_masking_needs_offsets(bert_tokenizer):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collator = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, whole_word_mask=True)
    with pytest.raises(ValueError, match="return_offsets_mapping=True"):
        collator([{"input_ids": [101, 2000, 102]}])


def test_special_tokens_mask_key_decides_when_given(bert_tokenizer):
    rows = [
        {"input_ids": [101, 2000, 2001, 102], "special_tokens_mask": [0, 1, 0, 1]},
        {"input_ids": [101, 2002, 102], "special_tokens_mask": [0, 0, 1]},
    ]
    collator = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, mlm_probability=1.0)
    batch = collator(rows)
    # The key's flags, padded with 1: [CLS] is maskable here, 2000 is not, padding is not.
    assert (batch["labels"] != -100).tolist() == [
        [True, False, True, False],
        [True, True, False, False],
    ]


def test_a_tokenizer_with_its_own_special_tokens_is_asked_row_by_row(bert_tokenizer):
    tokenizer = copy.deepcopy(bert_tokenizer)

    class NothingSpecial(type(tokenizer)):
        def get_special_tokens_mask(self, token_ids_0, token_ids_1=None, **kwargs):
            return [0] * len(token_ids_0)

    tokenizer.__class__ = NothingSpecial
    rows = [{"input_ids": [101, 2000, 102]}, {"input_ids": [101, 102]}]
    batch = fastcollate.DataCollatorForLanguageModeling(tokenizer, mlm_probability=1.0)(rows)
    assert (batch["labels"] != -100).all()  # as in transformers: even [CLS], [SEP], padding


def test_special_ids_are_read_once_per_tokenizer(bert_tokenizer):
    tokenizer = copy.deepcopy(bert_tokenizer)
    reads = []
    base = type(tokenizer)

    class Counting(base):
        @property
        def all_special_ids(self):
            reads.append(1)
            return base.all_special_ids.fget(self)

    tokenizer.__class__ = Counting
    collator = fastcollate.DataCollatorForLanguageModeling(tokenizer)
    rows = [{"input_ids": [101, 2000, 2001, 102]}]
    for _ in range(5):
        collator(rows)
    assert len(reads) == 1
    tokenizer.add_special_tokens({"additional_special_tokens": ["[NEW]"]})
    new_id = tokenizer.convert_tokens_to_ids("[NEW]")
    batch = collator([{"input_ids": [101, new_id, 102]}])
    assert len(reads) == 2, "a grown vocabulary is read again"
    assert batch["labels"].tolist() == [[-100, -100, -100]]


# --- Seeding ------------------------------------------------------------------------------------


def masks(collator, rows, calls=3):
    return [collator(copy.deepcopy(rows)) for _ in range(calls)]


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
def test_seeded_masks_are_a_function_of_seed_and_batch_number(
    bert_tokenizer, encoded, return_tensors
):
    rows = rows_of(encoded)[:8]

    def make(seed):
        return fastcollate.DataCollatorForLanguageModeling(
            bert_tokenizer, seed=seed, return_tensors=return_tensors
        )

    first, again, other = masks(make(1), rows), masks(make(1), rows), masks(make(2), rows)
    torch.manual_seed(0)  # the global generators play no part
    np.random.seed(0)
    for a, b in zip(first, again, strict=True):
        assert_same_batch(a, b)
    for a, b in zip(first, other, strict=True):
        assert not np.array_equal(as_numpy(a["labels"]), as_numpy(b["labels"]))
    assert not np.array_equal(as_numpy(first[0]["labels"]), as_numpy(first[1]["labels"]))


def test_unseeded_masks_follow_the_global_generators(bert_tokenizer, encoded):
    rows = rows_of(encoded)[:8]
    for return_tensors, seed_global in (("pt", torch.manual_seed), ("np", np.random.seed)):
        collator = fastcollate.DataCollatorForLanguageModeling(
            bert_tokenizer, return_tensors=return_tensors
        )
        seed_global(3)
        first = masks(collator, rows)
        seed_global(3)
        again = masks(collator, rows)
        seed_global(4)
        other = masks(collator, rows)
        for a, b, c in zip(first, again, other, strict=True):
            assert_same_batch(a, b)
            assert not np.array_equal(as_numpy(a["labels"]), as_numpy(c["labels"]))
        assert not np.array_equal(as_numpy(first[0]["labels"]), as_numpy(first[1]["labels"]))
    transformers.set_seed(7)
    a = collator(copy.deepcopy(rows))
    transformers.set_seed(7)
    assert_same_batch(a, collator(copy.deepcopy(rows)))


@pytest.mark.multiprocess
def test_dataloader_workers_differ_and_seeded_runs_repeat(bert_tokenizer, monkeypatch):
    rows = [{"input_ids": [101, *range(2000, 2040), 102]}] * 8

    def worker(worker_id, seed):
        monkeypatch.setattr(
            multiprocessing, "current_process", lambda: types.SimpleNamespace(name="W")
        )
        monkeypatch.setattr(
            torch.utils.data, "get_worker_info", lambda: types.SimpleNamespace(id=worker_id)
        )
        collator = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, seed=seed)
        return collator(rows)["labels"]

    assert torch.equal(worker(1, 5), worker(1, 5))
    assert not torch.equal(worker(0, 5), worker(1, 5))
    assert not torch.equal(worker(1, 5), worker(0, 6)), "not seed + worker id"

    # Unseeded, in real DataLoader workers: torch seeds each worker's generator differently.
    monkeypatch.undo()
    collator = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer)

    def run():
        torch.manual_seed(11)
        loader = torch.utils.data.DataLoader(rows, batch_size=4, num_workers=2, collate_fn=collator)
        return [batch["labels"] for batch in loader]

    first, again = run(), run()
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], first[1]), "the two workers drew the same masks"


# --- Against transformers -----------------------------------------------------------------------


def selection_rates(collate, rows, calls, reseed):
    total = None
    for call in range(calls):
        reseed(call)
        labels = as_numpy(collate(copy.deepcopy(rows))["labels"])
        selected = (labels != -100).astype(np.int64)
        total = selected if total is None else total + selected
    return total


@pytest.mark.parametrize("whole_word_mask", [False, True])
def test_per_position_selection_rates_agree_with_transformers(bert_tokenizer, whole_word_mask):
    calls = 600
    if whole_word_mask:
        rows, _ = whole_word_rows(bert_tokenizer, sentences(6, seed=3))
        rows = [{k: v[:24] for k, v in row.items()} for row in rows]
    else:
        encoded = bert_tokenizer(sentences(6, seed=3))
        rows = [{"input_ids": ids} for ids in encoded["input_ids"]]
    kwargs = {"mlm_probability": 0.3, "whole_word_mask": whole_word_mask}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, **kwargs)
        theirs = transformers.DataCollatorForLanguageModeling(bert_tokenizer, **kwargs)
    ours_counts = selection_rates(ours, rows, calls, lambda call: torch.manual_seed(call))
    theirs_counts = selection_rates(theirs, rows, calls, lambda call: torch.manual_seed(call))
    assert ours_counts.shape == theirs_counts.shape
    never = theirs_counts == 0
    assert (ours_counts[never] == 0).all(), "selected where transformers never selects"
    pooled = (ours_counts + theirs_counts) / (2 * calls)
    sd = np.sqrt(np.maximum(pooled * (1 - pooled), 1e-12) * 2 / calls)
    difference = np.abs(ours_counts - theirs_counts) / calls
    assert (difference[~never] <= Z * sd[~never]).all(), difference.max()
    assert (~never).sum() > 50
    # Over all positions at once, a small bias in the rate shows.
    trials = int((~never).sum()) * calls
    pooled_rate = (ours_counts.sum() + theirs_counts.sum()) / (2 * trials)
    total_sd = (pooled_rate * (1 - pooled_rate) * 2 * trials) ** 0.5
    assert abs(int(ours_counts.sum()) - int(theirs_counts.sum())) <= Z * total_sd


@st.composite
def language_modeling_case(draw):
    size = draw(st.integers(1, 5))
    fmt = draw(st.sampled_from(FORMATS))
    mode = draw(st.sampled_from(["mapping", "mapping", "sequence"]))
    special_mask = draw(st.booleans())
    rows = []
    for _ in range(size):
        length = draw(st.integers(1, 10))
        values = draw(
            st.lists(
                st.one_of(st.integers(1000, 30000), st.sampled_from([0, 100, 101, 102, 103])),
                min_size=length,
                max_size=length,
            )
        )
        if mode == "sequence":
            rows.append(to_format(values, fmt))
            continue
        row = {"input_ids": to_format(values, fmt), "token_type_ids": to_format([0] * length, fmt)}
        if special_mask:
            flags = draw(st.lists(st.integers(0, 1), min_size=length, max_size=length))
            row["special_tokens_mask"] = to_format(flags, fmt)
        rows.append(row)
    options = {
        "mlm_probability": draw(st.sampled_from([0.0, 0.15, 0.5, 1.0])),
        "pad_to_multiple_of": draw(st.one_of(st.none(), st.integers(1, 8))),
        "return_tensors": draw(st.sampled_from(["pt", "np"])),
        "seed": draw(st.one_of(st.none(), st.integers(0, 2**16))),
    }
    return rows, options, draw(st.sampled_from(["left", "right"]))


@SETTINGS
@given(case=language_modeling_case())
def test_native_batches_have_transformers_structure(bert_tokenizer, case):
    """Keys, key order, shapes, dtypes, containers and every unmasked value as transformers'
    collator gives them; only which positions are masked differs."""
    rows, options, side = case
    tokenizer = copy.copy(bert_tokenizer)
    tokenizer.padding_side = side
    if isinstance(rows[0], torch.Tensor) and options["return_tensors"] == "np":
        rows = [row.numpy() for row in rows]  # transformers cannot pad these (see test_family)
    before = copy.deepcopy(rows)
    ours = fastcollate.DataCollatorForLanguageModeling(tokenizer, **options)(rows)
    theirs = transformers.DataCollatorForLanguageModeling(tokenizer, **options)(copy.deepcopy(rows))
    assert type(ours) is type(theirs)
    assert list(ours) == list(theirs)
    for key in theirs:
        assert type(ours[key]) is type(theirs[key])
        assert ours[key].dtype == theirs[key].dtype and ours[key].shape == theirs[key].shape
        if key not in ("input_ids", "labels"):
            assert_same_batch({key: ours[key]}, {key: theirs[key]})
    np.testing.assert_array_equal(unmasked(ours), unmasked(theirs))
    if options["mlm_probability"] in (0.0, 1.0):  # no randomness in which positions
        np.testing.assert_array_equal(
            as_numpy(ours["labels"]) != -100, as_numpy(theirs["labels"]) != -100
        )
    for row, saved in zip(rows, before, strict=True):  # the caller's rows are untouched
        for a, b in zip(
            row.values() if isinstance(row, dict) else [row],
            saved.values() if isinstance(saved, dict) else [saved],
            strict=True,
        ):
            assert np.array_equal(as_numpy(a), as_numpy(b))


def test_masking_is_in_place_on_the_given_buffer(bert_tokenizer):
    collator = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, mlm_probability=1.0)
    tensor = torch.tensor([[101, 2000, 2001, 102]])
    pointer = tensor.data_ptr()
    inputs, labels = collator.torch_mask_tokens(tensor)
    assert inputs is tensor and inputs.data_ptr() == pointer
    assert labels.tolist() == [[-100, 2000, 2001, -100]]
    array = np.array([[101, 2000, 102]])
    inputs, labels = collator.numpy_mask_tokens(array)
    assert inputs is array and labels.tolist() == [[-100, 2000, -100]]
    # Other dtypes and layouts are masked in a copy and written back.
    narrow = torch.tensor([[101, 2000, 2001, 102]], dtype=torch.int32).t().contiguous().t()
    inputs, labels = collator.torch_mask_tokens(narrow)
    assert inputs is narrow and labels.dtype == torch.int32
    assert labels.tolist() == [[-100, 2000, 2001, -100]] and inputs[0, 0] == 101
    with pytest.raises(ValueError, match="2-d batch"):
        collator.numpy_mask_tokens(np.array([101, 2000, 102]))
    with pytest.raises(ValueError, match="'special_tokens_mask' has shape"):
        collator.numpy_mask_tokens(array, special_tokens_mask=np.zeros((1, 2)))


def test_subclass_masking_methods_are_called(bert_tokenizer):
    calls = []

    class Custom(fastcollate.DataCollatorForLanguageModeling):
        def torch_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
            calls.append("torch")
            return super().torch_mask_tokens(inputs, special_tokens_mask, offset_mapping)

        def numpy_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
            calls.append("numpy")
            labels = np.full_like(inputs, 7)
            return inputs, labels

    rows = [{"input_ids": [101, 2000, 102]}]
    batch = Custom(bert_tokenizer, mlm_probability=1.0)(rows)
    assert batch["labels"].tolist() == [[-100, 2000, -100]]
    assert Custom(bert_tokenizer, return_tensors="np")(rows)["labels"].tolist() == [[7, 7, 7]]
    assert calls == ["torch", "numpy"]


@pytest.mark.parametrize("mask_rng", ["native", "torch"])
def test_works_while_transformers_is_patched_and_after(bert_tokenizer, mask_rng):
    rows = [{"input_ids": [101, 2000, 2001, 2002, 102]}, {"input_ids": [101, 2003, 102]}]
    original = transformers.DataCollatorForLanguageModeling
    for patched in (True, False):
        handle = fastcollate.patch_transformers() if patched else None
        try:
            assert (transformers.DataCollatorForLanguageModeling is not original) == patched
            collator = fastcollate.DataCollatorForLanguageModeling(
                bert_tokenizer, mlm_probability=0.5, mask_rng=mask_rng, seed=3
            )
            batch = collator(rows)
            if mask_rng == "torch":
                expected = original(bert_tokenizer, mlm_probability=0.5, seed=3)(rows)
                assert_same_batch(batch, expected)
            assert np.array_equal(
                unmasked(batch), [[101, 2000, 2001, 2002, 102], [101, 2003, 102, 0, 0]]
            )
        finally:
            if handle is not None:
                handle.undo()


def test_torch_masks_need_transformers(bert_tokenizer, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers.data.data_collator", None)
    with pytest.raises(ImportError, match="mask_rng='torch'.*needs transformers"):
        fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, mask_rng="torch")
    fastcollate.DataCollatorForLanguageModeling(bert_tokenizer)([{"input_ids": [101, 2000, 102]}])


# --- A real MLM fine-tune -----------------------------------------------------------------------


STEPS = 24


def fine_tune_losses(trainer_cls, collator, model_path, dataset, tmp_path):
    torch.manual_seed(0)  # the MLM head is freshly initialised
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the checkpoint has no MLM head
        model = AutoModelForMaskedLM.from_pretrained(model_path)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        max_steps=STEPS,
        logging_steps=1,
        learning_rate=1e-3,
        seed=0,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = trainer_cls(model=model, args=args, train_dataset=dataset, data_collator=collator)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only contend on a shared machine
    try:
        trainer.train()
    finally:
        torch.set_num_threads(threads)
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


@pytest.mark.slow
def test_mlm_fine_tune_loss_falls_as_with_transformers_collator(
    bert_tokenizer, model_path, tmp_path
):
    # Short rows keep it quick: the MLM head scores every token against the whole vocabulary.
    texts = sentences(96, seed=4, longest=8)
    dataset = datasets.Dataset.from_dict({"text": texts}).map(
        lambda b: bert_tokenizer(b["text"], return_special_tokens_mask=True),
        batched=True,
        remove_columns=["text"],
    )
    ours, theirs = (
        fine_tune_losses(
            library.Trainer,
            library.DataCollatorForLanguageModeling(bert_tokenizer, mlm_probability=0.3),
            model_path,
            dataset,
            tmp_path / library.__name__,
        )
        for library in (fastcollate, transformers)
    )
    assert len(ours) == len(theirs) == STEPS
    assert all(np.isfinite(ours)) and all(np.isfinite(theirs))
    assert ours != theirs  # different masks, so different losses
    for losses in (ours, theirs):
        start, end = np.mean(losses[:5]), np.mean(losses[-5:])
        assert end < 0.75 * start, losses
    # The same trend: after the same steps on the same data, the losses have fallen as far
    # (the mean of the last five steps agrees within noise; per-step losses vary by ~10%).
    ours_end, theirs_end = np.mean(ours[-5:]), np.mean(theirs[-5:])
    assert abs(ours_end - theirs_end) < 0.25 * theirs_end, (ours, theirs)
