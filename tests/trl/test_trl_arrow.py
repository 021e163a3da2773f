"""The Arrow path for TRL's SFTTrainer: `fastcollate.trl.SFTTrainer` (which `patch_trl()` puts in
`trl`) hands fastcollate's collator ArrowBatch handles, and the batches and losses are TRL's;
where the batches could differ (TRL's own collator, text columns kept) the rows are used."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("trl", reason="TRL needs Python >= 3.11 (the trl extra)")

import datasets  # noqa: E402
import torch  # noqa: E402
import trl  # noqa: E402
import trl.trainer  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from transformers import AutoTokenizer, LlamaForCausalLM  # noqa: E402
from trl.trainer.dpo_trainer import DataCollatorForPreference as TRLPreference  # noqa: E402
from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference as TRLUnpaired  # noqa: E402
from trl.trainer.reward_trainer import DataCollatorForPreference as TRLReward  # noqa: E402
from trl.trainer.sft_trainer import (  # noqa: E402
    DataCollatorForLanguageModeling as TRLCollator,
)

import fastcollate  # noqa: E402
import fastcollate.trl  # noqa: E402
from fastcollate import ArrowBatch, ArrowBatches  # noqa: E402
from fastcollate.arrow.trainer_datasets import wrap_for_trainer  # noqa: E402
from fastcollate.trl import (  # noqa: E402
    DataCollatorForLanguageModeling,
    DataCollatorForPreference,
    DataCollatorForUnpairedPreference,
    RewardDataCollatorForPreference,
)
from tests.support.compare import assert_same_batch  # noqa: E402
from tests.support.hypothesis_profiles import examples
from tests.support.preference_cases import dpo_case, kto_case, reward_case  # noqa: E402
from tests.support.sft_runs import MODES, mode_params, sft_dataset  # noqa: E402
from tests.support.tiny_models import tiny_llama_config  # noqa: E402

pytestmark = pytest.mark.parity

SETTINGS = settings(
    max_examples=examples(50),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def seen(monkeypatch):
    """The type of every batch fastcollate's SFT collator is handed (patched on the class
    itself, so the collator still says it takes Arrow batches)."""
    types: list[type] = []
    call = DataCollatorForLanguageModeling.torch_call

    def recording(self, examples):
        types.append(type(examples))
        return call(self, examples)

    monkeypatch.setattr(DataCollatorForLanguageModeling, "torch_call", recording)
    return types


def _trainer(model_path, tmp_path, mode: str, trainer_class, **extra):
    """A seeded tiny Llama under `trainer_class` (TRL's SFTTrainer or a subclass) on the
    fixture dataset of test_trl_patch, in one of its modes."""
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    config = tiny_llama_config(tokenizer)
    dataset = extra.pop("train_dataset", None) or sft_dataset(tokenizer)
    args = trl.SFTConfig(
        output_dir=str(tmp_path / mode),
        eos_token="[SEP]",
        per_device_train_batch_size=4,
        per_device_eval_batch_size=3,
        max_steps=4,
        logging_steps=1,
        learning_rate=1e-2,
        report_to=[],
        use_cpu=True,
        seed=0,
        data_seed=0,
        dataloader_num_workers=0,
        **{**MODES[mode], **extra},
    )
    return trainer_class(
        model=LlamaForCausalLM(config),
        args=args,
        train_dataset=dataset,
        eval_dataset=dataset.select(range(7)),
        processing_class=tokenizer,
    )


def _losses(trainer) -> list[float]:
    trainer.train()
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def _batches(loader) -> list[dict]:
    torch.manual_seed(1)  # the random sampler's draw
    return list(loader)


def _assert_same_batches(ours: list[dict], theirs: list[dict]) -> None:
    assert len(ours) == len(theirs) > 0
    for mine, trls in zip(ours, theirs, strict=True):
        assert_same_batch(mine, trls)


# --- a real SFTTrainer, step for step ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", mode_params())
def test_patched_sft_trainer_trains_the_same_from_arrow(model_path, tmp_path, mode, seen):
    theirs = _losses(_trainer(model_path, tmp_path / "trl", mode, trl.SFTTrainer))
    assert not seen
    with fastcollate.patch_trl():
        # An unchanged script: it looks SFTTrainer up in trl after the patch.
        trainer = _trainer(model_path, tmp_path / "ours", mode, trl.SFTTrainer)
        assert type(trainer) is fastcollate.trl.SFTTrainer
        assert type(trainer.data_collator) is DataCollatorForLanguageModeling
        ours = _losses(trainer)
    assert len(theirs) == 4
    assert ours == theirs
    # Accelerate's DataLoader fetches one batch ahead: at least the 4 trained on.
    assert len(seen) >= 4 and set(seen) == {ArrowBatch}


@pytest.mark.parametrize("mode", mode_params())
def test_train_and_eval_loaders_give_trls_batches(model_path, tmp_path, mode, seen):
    plain = _trainer(model_path, tmp_path / "trl", mode, trl.SFTTrainer)
    with fastcollate.patch_trl():
        ours = _trainer(model_path, tmp_path / "ours", mode, fastcollate.trl.SFTTrainer)
    loader = ours.get_train_dataloader()
    assert isinstance(loader.dataset, ArrowBatches)
    # TRL's preparation builds labels; packing adds seq_lengths.
    kept = {"input_ids", "labels"} | ({"seq_lengths"} if mode == "packed" else set())
    assert set(loader.dataset.columns) == kept
    _assert_same_batches(_batches(loader), _batches(plain.get_train_dataloader()))
    eval_loader = ours.get_eval_dataloader()
    assert isinstance(eval_loader.dataset, ArrowBatches)
    _assert_same_batches(_batches(eval_loader), _batches(plain.get_eval_dataloader()))
    assert seen and set(seen) == {ArrowBatch}


def test_length_grouping_reads_the_dataset_under_the_arrow_batches(model_path, tmp_path, seen):
    options = {"train_sampling_strategy": "group_by_length"}
    plain = _trainer(model_path, tmp_path / "trl", "padded", trl.SFTTrainer, **options)
    with fastcollate.patch_trl():
        ours = _trainer(
            model_path, tmp_path / "ours", "padded", fastcollate.trl.SFTTrainer, **options
        )
    loader = ours.get_train_dataloader()
    assert isinstance(loader.dataset, ArrowBatches)
    _assert_same_batches(_batches(loader), _batches(plain.get_train_dataloader()))
    assert set(seen) == {ArrowBatch}


# --- where the rows stay rows -----------------------------------------------------------------


def test_trls_own_collator_gets_rows(model_path, tmp_path):
    # Unpatched, SFTTrainer builds TRL's collator, which needs Python rows.
    plain = _trainer(model_path, tmp_path / "trl", "padded", trl.SFTTrainer)
    ours = _trainer(model_path, tmp_path / "ours", "padded", fastcollate.trl.SFTTrainer)
    assert type(ours.data_collator) is TRLCollator
    loader = ours.get_train_dataloader()
    assert isinstance(loader.dataset, datasets.Dataset)
    _assert_same_batches(_batches(loader), _batches(plain.get_train_dataloader()))


def test_text_columns_kept_keep_the_rows(model_path, tmp_path, seen):
    # remove_unused_columns=False keeps a text column the Arrow path does not read: the rows
    # (with the text) go to the collator, which ignores the text as TRL's does.
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    dataset = sft_dataset(tokenizer)
    dataset = dataset.add_column("source", [f"doc {i}" for i in range(len(dataset))])
    options = {"remove_unused_columns": False, "train_dataset": dataset}
    plain = _trainer(model_path, tmp_path / "trl", "padded", trl.SFTTrainer, **options)
    with fastcollate.patch_trl():
        ours = _trainer(
            model_path, tmp_path / "ours", "padded", fastcollate.trl.SFTTrainer, **options
        )
    loader = ours.get_train_dataloader()
    assert isinstance(loader.dataset, datasets.Dataset)
    _assert_same_batches(_batches(loader), _batches(plain.get_train_dataloader()))
    assert seen and set(seen) == {list}


@pytest.mark.parametrize("name", ["SFTTrainer", "DPOTrainer", "RewardTrainer", "KTOTrainer"])
def test_patch_puts_the_trainers_in_trl_and_takes_them_back(name):
    theirs, ours = getattr(trl, name), getattr(fastcollate.trl, name)
    assert ours is not theirs and issubclass(ours, theirs)
    with fastcollate.patch_trl() as handle:
        assert getattr(trl, name) is ours and getattr(trl.trainer, name) is ours
        assert f"trl.{name}" in repr(handle)
    assert getattr(trl, name) is theirs and getattr(trl.trainer, name) is theirs


# --- the batches of the Arrow path, over datasets hypothesis draws ----------------------------

_OPTIONS = [
    {"pad_token_id": 0},
    {"pad_token_id": 0, "pad_to_multiple_of": 4},
    {"pad_token_id": 0, "return_position_ids": True},
    {"pad_token_id": 0, "padding_free": True},
    {"pad_token_id": 0, "padding_free": True, "pad_to_multiple_of": 8},
]


@st.composite
def _sft_datasets(draw):
    """A prepared SFT dataset as TRL leaves it (input_ids, maybe labels, maybe seq_lengths),
    in one or several Arrow chunks, perhaps behind an indices mapping."""
    n = draw(st.integers(1, 12))
    with_labels = draw(st.booleans())
    packed = draw(st.booleans())
    rows = []
    for _ in range(n):
        parts = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3 if packed else 1))
        ids = draw(
            st.lists(st.integers(0, 500), min_size=sum(parts), max_size=sum(parts))
        )
        row = {"input_ids": ids}
        if with_labels:
            row["labels"] = [draw(st.sampled_from([-100, t])) for t in ids]
        if packed:
            row["seq_lengths"] = parts
        rows.append(row)
    cut = draw(st.integers(0, n))
    pieces = [rows[:cut], rows[cut:]] if 0 < cut < n else [rows]
    dataset = datasets.concatenate_datasets([datasets.Dataset.from_list(p) for p in pieces])
    view = draw(st.sampled_from(["all", "shuffle", "select", "filter"]))
    if view == "shuffle":
        dataset = dataset.shuffle(seed=draw(st.integers(0, 99)))
    elif view == "select":
        picked = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=2 * n))
        dataset = dataset.select(picked)
    elif view == "filter":
        dataset = dataset.filter(lambda row: len(row["input_ids"]) % 3 != 1)
        if not len(dataset):
            dataset = datasets.Dataset.from_list(rows)
    return dataset


@SETTINGS
@given(dataset=_sft_datasets(), options=st.sampled_from(_OPTIONS), data=st.data())
def test_arrow_loader_batches_equal_rows_and_trl(dataset, options, data):
    ours = DataCollatorForLanguageModeling(**options)
    wrapped = wrap_for_trainer(dataset, ours)
    assert isinstance(wrapped, ArrowBatches)
    batch_size = data.draw(st.integers(1, 5))
    arrow = torch.utils.data.DataLoader(wrapped, batch_size=batch_size, collate_fn=ours)
    rows = torch.utils.data.DataLoader(dataset, batch_size=batch_size, collate_fn=ours)
    theirs = torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, collate_fn=TRLCollator(**options)
    )
    arrow_batches = list(arrow)
    _assert_same_batches(arrow_batches, list(rows))
    _assert_same_batches(arrow_batches, list(theirs))


# --- the preference collators read from Arrow -------------------------------------------------


def _arrow_views(draw, rows: list[dict]) -> tuple[datasets.Dataset, list[int]]:
    """`rows` as a dataset in one or two Arrow chunks, perhaps shuffled or selected, and the
    positions of a batch drawn from it."""
    # Token columns as TRL's tokenizing map leaves them: lists of int64, even when every list
    # drawn is empty (Arrow would infer lists of nulls, which no collator reads from Arrow).
    features = datasets.Dataset.from_list(rows).features
    for key, feature in features.items():
        if isinstance(feature, datasets.List) and feature.feature.dtype == "null":
            features[key] = datasets.List(datasets.Value("int64"))
    cut = draw(st.integers(0, len(rows)))
    pieces = [rows[:cut], rows[cut:]] if 0 < cut < len(rows) else [rows]
    dataset = datasets.concatenate_datasets(
        [datasets.Dataset.from_list(p, features=features) for p in pieces]
    )
    view = draw(st.sampled_from(["all", "shuffle", "select"]))
    if view == "shuffle":
        dataset = dataset.shuffle(seed=draw(st.integers(0, 99)))
    elif view == "select":
        picked = draw(st.lists(st.integers(0, len(rows) - 1), min_size=1, max_size=8))
        dataset = dataset.select(picked)
    indices = draw(st.lists(st.integers(0, len(dataset) - 1), min_size=1, max_size=6))
    return dataset, indices


def _same_from_arrow(ours_class, theirs_class, rows, options, draw, first_keys) -> dict:
    """The collator's output for an ArrowBatch equals its output for the same rows read through
    datasets, and TRL's collator's for those rows (except where TRL's batch turns float32: an
    empty first sequence, made of `first_keys` of the first row; see test_trl_preference; KTO's
    is int64 always)."""
    dataset, indices = _arrow_views(draw, rows)
    ours = ours_class(**options)
    assert ours.accepts_arrow_batches
    batch = ArrowBatches(dataset).__getitems__(indices)
    from_rows = dataset.__getitems__(indices)
    arrow = ours(batch)
    assert_same_batch(arrow, ours(from_rows))
    if not first_keys or any(from_rows[0][key] for key in first_keys):
        assert_same_batch(arrow, theirs_class(**options)(from_rows))
    return arrow


@SETTINGS
@given(case=dpo_case(), data=st.data())
def test_dpo_collator_from_arrow_equals_rows_and_trl(case, data):
    rows, options = case
    _same_from_arrow(
        DataCollatorForPreference, TRLPreference, rows, options, data.draw,
        ("prompt_ids", "chosen_ids"),
    )


@SETTINGS
@given(case=reward_case(), data=st.data())
def test_reward_collator_from_arrow_equals_rows_and_trl(case, data):
    rows, options = case
    rows = [{k: v.tolist() if hasattr(v, "tolist") else v for k, v in r.items()} for r in rows]
    _same_from_arrow(
        RewardDataCollatorForPreference, TRLReward, rows, options, data.draw, ("chosen_ids",)
    )


@SETTINGS
@given(case=kto_case(), data=st.data())
def test_kto_collator_from_arrow_equals_rows_and_trl(case, data):
    rows, options = case
    _same_from_arrow(
        DataCollatorForUnpairedPreference, TRLUnpaired, rows, options, data.draw, ()
    )


def test_preference_arrow_reads_without_rows(monkeypatch):
    # The Arrow read builds no Python row: ArrowBatch.rows() is never called.
    rows = [
        {"prompt_ids": [1, 2, 3], "chosen_ids": [4, 5], "rejected_ids": [6]},
        {"prompt_ids": [7, 8], "chosen_ids": [9], "rejected_ids": [10, 11]},
    ]
    batch = ArrowBatches(datasets.Dataset.from_list(rows)).__getitems__([1, 0])

    def no_rows(self):
        raise AssertionError("read as rows")

    monkeypatch.setattr(ArrowBatch, "rows", no_rows)
    output = DataCollatorForPreference(pad_token_id=0, max_length=3, truncation_mode="keep_end")(
        batch
    )
    assert output["input_ids"].tolist() == [[7, 8, 9], [3, 4, 5], [8, 10, 11], [2, 3, 6]]
    assert output["completion_mask"].tolist() == [[0, 0, 1], [0, 1, 1], [0, 1, 1], [0, 0, 1]]


@pytest.mark.parametrize(
    "rows, error, match",
    [
        # Not integers, nulls, a missing column: the row path decides, with its own error.
        ([{"prompt_ids": [1.5], "chosen_ids": [2], "rejected_ids": [3]}], TypeError,
         "'prompt_ids' \\+ 'chosen_ids' in row 0"),
        ([{"prompt_ids": [1], "chosen_ids": [2], "rejected_ids": [3]},
          {"prompt_ids": None, "chosen_ids": [2], "rejected_ids": [3]}], TypeError, "row 1"),
        ([{"prompt_ids": [1], "chosen_ids": [2]}], ValueError,
         "row 0 has no 'rejected_ids'"),
    ],
)  # fmt: skip
def test_preference_arrow_raises_as_the_rows_do(rows, error, match):
    dataset = datasets.Dataset.from_list(rows)
    collator = DataCollatorForPreference(pad_token_id=0)
    with pytest.raises(error, match=match):
        collator(dataset.__getitems__(list(range(len(rows)))))
    batch = ArrowBatches(dataset).__getitems__(list(range(len(rows))))
    with pytest.raises(error, match=match):
        collator(batch)


# --- real DPO and reward trainers, step for step ----------------------------------------------

_TEXTS = [
    ("the cat", "sat on the mat", "ran away"),
    ("a dog ran", "in the park", "into the old tree by the road"),
    ("birds", "sing", "are quiet today in the rain"),
    ("the quick brown fox", "jumps over the lazy dog", "sleeps"),
] * 3


def _preference_trainer(model_path, tmp_path, kind: str, trainer_class):
    """A seeded tiny Llama under TRL's DPO trainer (text prompt / chosen / rejected, tokenized
    by TRL), KTO trainer (text prompt / completion / label) or reward trainer (tokenized
    chosen_ids / rejected_ids with a margin)."""
    from transformers import LlamaForSequenceClassification

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    config = tiny_llama_config(
        tokenizer,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=1,
    )
    common = {
        "output_dir": str(tmp_path / kind),
        "per_device_train_batch_size": 4,
        "max_steps": 3,
        "logging_steps": 1,
        "learning_rate": 1e-2,
        "report_to": [],
        "use_cpu": True,
        "seed": 0,
        "data_seed": 0,
        "dataloader_num_workers": 0,
    }
    if kind == "dpo":
        prompts, chosen, rejected = (list(column) for column in zip(*_TEXTS, strict=True))
        dataset = datasets.Dataset.from_dict(
            {"prompt": prompts, "chosen": chosen, "rejected": rejected}
        )
        tokenizer.eos_token = "[SEP]"  # DPO appends it to the completions
        args = trl.DPOConfig(max_length=16, **common)
        model = LlamaForCausalLM(config)
        extra = {"ref_model": copy.deepcopy(model)}
    elif kind == "kto":
        prompts, completions, labels = [], [], []
        for index, (prompt, chosen, rejected) in enumerate(_TEXTS):
            prompts.append(prompt)
            completions.append(chosen if index % 2 else rejected)
            labels.append(bool(index % 2))
        dataset = datasets.Dataset.from_dict(
            {"prompt": prompts, "completion": completions, "label": labels}
        )
        tokenizer.eos_token = "[SEP]"
        args = trl.KTOConfig(max_length=16, **common)
        model = LlamaForCausalLM(config)
        extra = {"ref_model": copy.deepcopy(model)}
    else:
        ids = [tokenizer(p + " " + c)["input_ids"] for p, c, _ in _TEXTS]
        worse = [tokenizer(p + " " + r)["input_ids"] for p, _, r in _TEXTS]
        margins = [0.5 * (i % 3) for i in range(len(ids))]
        dataset = datasets.Dataset.from_dict(
            {"chosen_ids": ids, "rejected_ids": worse, "margin": margins}
        )
        args = trl.RewardConfig(**common)
        model = LlamaForSequenceClassification(config)
        extra = {}
    return trainer_class(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer, **extra
    )


_NAMES = {"dpo": "DPOTrainer", "reward": "RewardTrainer", "kto": "KTOTrainer"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind, collator",
    [
        ("dpo", DataCollatorForPreference),
        ("reward", RewardDataCollatorForPreference),
        ("kto", DataCollatorForUnpairedPreference),
    ],
)
def test_patched_preference_trainers_train_the_same_from_arrow(
    model_path, tmp_path, monkeypatch, kind, collator
):
    seen: list[type] = []
    call = collator.torch_call

    def recording(self, examples):
        seen.append(type(examples))
        return call(self, examples)

    monkeypatch.setattr(collator, "torch_call", recording)
    plain = _preference_trainer(model_path, tmp_path / "trl", kind, getattr(trl, _NAMES[kind]))
    theirs = _losses(plain)
    assert not seen
    with fastcollate.patch_trl():
        trainer = _preference_trainer(
            model_path, tmp_path / "ours", kind, getattr(trl, _NAMES[kind])
        )
        assert type(trainer) is getattr(fastcollate.trl, _NAMES[kind])
        assert type(trainer.data_collator) is collator
        ours = _losses(trainer)
    assert len(theirs) == 3
    assert ours == theirs
    assert len(seen) >= 3 and set(seen) == {ArrowBatch}

