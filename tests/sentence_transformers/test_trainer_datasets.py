"""`fastcollate.sentence_transformers.SentenceTransformerTrainer` on what its docs promise beside
a plain `datasets.Dataset`, against sentence-transformers' own trainer from the same seed: a
`DatasetDict` and an `IterableDataset` (through sentence-transformers' collator) give its
batches, and a raw text column added after pre-tokenizing (mined hard negatives) is tokenized
as sentence-transformers tokenizes it, not left out; the bare collator refuses such a column,
naming it."""

from __future__ import annotations

import pytest

st_package = pytest.importorskip("sentence_transformers")
datasets = pytest.importorskip("datasets")

from sentence_transformers import (  # noqa: E402
    SentenceTransformer,
    SentenceTransformerTrainingArguments,
)
from sentence_transformers.sentence_transformer.losses import (  # noqa: E402
    MultipleNegativesRankingLoss,
)

from fastcollate.sentence_transformers import (  # noqa: E402
    SentenceTransformerDataCollator,
    SentenceTransformerTrainer,
    pretokenize,
)
from tests.support.compare import assert_same_value  # noqa: E402

pytestmark = pytest.mark.parity

ANIMALS = ["cat", "dog", "owl", "fox", "eel", "yak"]
PLACES = ["mat", "sofa", "tree", "den", "river", "hill"]


def triples(offset: int = 0) -> datasets.Dataset:
    rows = [{"anchor": f"where is the {a}?",
             "positive": f"the {a} is on the {p}",
             "negative": f"the {ANIMALS[(i + 1) % 6]} is {'very ' * (i % 3)}far away"}
            for i, (a, p) in enumerate(zip(ANIMALS * 2, (PLACES[offset:] + PLACES[:offset]) * 2,
                                           strict=True))]
    return datasets.Dataset.from_list(rows)


@pytest.fixture(scope="module")
def model(model_path):
    return SentenceTransformer(model_path, device="cpu")


def batches(trainer_class, model, dataset, tmp_path, **extra):
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_train_epochs=1,
        save_strategy="no", report_to=[], seed=3, use_cpu=True, dataloader_num_workers=0,
        disable_tqdm=True, **extra,
    )
    trainer = trainer_class(model=model, args=args, train_dataset=dataset,
                            loss=MultipleNegativesRankingLoss(model))
    return list(trainer.get_train_dataloader())


def assert_same_batches(ours, theirs):
    assert len(ours) == len(theirs) > 0
    for got, expected in zip(ours, theirs, strict=True):
        assert list(got) == list(expected), (list(got), list(expected))
        for key in expected:
            assert_same_value(key, got[key], expected[key])


@pytest.mark.parametrize("prompts", [None, {"anchor": "query: "}])
def test_a_dataset_dict_gives_st_batches(model, tmp_path, prompts):
    def dataset_dict():
        return datasets.DatasetDict({"first": triples(0), "second": triples(2)})

    extra = {"prompts": prompts} if prompts else {}
    assert_same_batches(
        batches(SentenceTransformerTrainer, model, dataset_dict(), tmp_path, **extra),
        batches(st_package.SentenceTransformerTrainer, model, dataset_dict(), tmp_path, **extra),
    )


def test_an_iterable_dataset_gives_st_batches(model, tmp_path):
    def stream():
        return triples().to_iterable_dataset()

    assert_same_batches(
        batches(SentenceTransformerTrainer, model, stream(), tmp_path, max_steps=3),
        batches(st_package.SentenceTransformerTrainer, model, stream(), tmp_path, max_steps=3),
    )


def test_a_raw_column_added_after_pretokenizing_is_tokenized_as_st_does(model, tmp_path):
    """Mined hard negatives: anchor and positive pre-tokenized, then a raw `negative` column."""
    raw = triples()
    pretokenized = pretokenize(raw.remove_columns("negative"), model,
                               prompts={"anchor": "query: "})
    mined = pretokenized.add_column("negative", raw["negative"])
    ours = batches(SentenceTransformerTrainer, model, mined, tmp_path,
                   prompts={"anchor": "query: "})
    theirs = batches(st_package.SentenceTransformerTrainer, model, raw, tmp_path,
                     prompts={"anchor": "query: "})
    assert_same_batches(ours, theirs)
    assert "negative_input_ids" in ours[0]


def test_pretokenize_completes_a_partly_pretokenized_dataset(model):
    raw = triples()
    whole = pretokenize(raw, model)
    partly = pretokenize(raw.remove_columns("negative"), model).add_column(
        "negative", raw["negative"])
    completed = pretokenize(partly, model)
    assert completed.column_names == whole.column_names
    assert completed.to_list() == whole.to_list()
    assert pretokenize(whole, model) is whole  # nothing left to tokenize


def test_the_collator_names_a_raw_column_beside_pretokenized_ones(model):
    raw = triples()
    mined = pretokenize(raw.remove_columns("negative"), model).add_column(
        "negative", raw["negative"])
    with pytest.raises(ValueError, match="column 'negative' is not pre-tokenized"):
        SentenceTransformerDataCollator(model.tokenizer)(list(mined.select(range(2))))
    with pytest.raises(ValueError, match="rename the column"):
        pretokenize(mined.rename_column("negative", "anchor"), model)
